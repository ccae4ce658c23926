"""A Docker engine of the test's own, for faults that must not touch the
engine everything else uses: restarting it mid-batch, filling its disk.

It is a real `dockerd` on a private socket, with its data root on a small
loop-mounted ext4 file system (so "the disk is full" is real and harms
nothing else), a bridge of its own and no iptables rules. Not `--bridge none`:
a dockerd started so deletes the host's `docker0`, which the main engine needs.
The sandbox image is copied in from the main engine. Needs root, `dockerd`,
`mkfs.ext4` and a loop device: what CI has.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import docker

DISK_MB = 1024
BRIDGE = "rbfault0"


class PrivateEngine:
    def __init__(self, root: Path):
        self.root = root
        self.mount = root / "mnt"
        self.socket = root / "engine.sock"
        self.url = f"unix://{self.socket}"
        self.log = root / "dockerd.log"
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "PrivateEngine":
        disk = self.root / "disk.img"
        with open(disk, "wb") as f:
            f.truncate(DISK_MB << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(disk)], check=True)
        self.mount.mkdir()
        subprocess.run(["mount", "-o", "loop", str(disk), str(self.mount)], check=True)
        (self.root / "daemon.json").write_text("{}")  # not the host's: no runtimes or mirrors of its own
        subprocess.run(["ip", "link", "delete", BRIDGE], check=False, stderr=subprocess.DEVNULL)  # a crashed run's
        subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            subprocess.run(["umount", "-l", str(self.mount)], check=False)
            subprocess.run(["ip", "link", "delete", BRIDGE], check=False)

    def start(self) -> None:
        # A new session: the engine and its containerd outlive no test, and no
        # signal meant for pytest's group reaches them.
        self._process = subprocess.Popen(
            ["dockerd", "--config-file", str(self.root / "daemon.json"), "--data-root", str(self.mount / "docker"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "dockerd.pid"),
             "--host", self.url, "--bridge", BRIDGE, "--iptables=false", "--ip-masq=false"],
            stdin=subprocess.DEVNULL, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115 (dockerd's log)
            start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                with docker.APIClient(base_url=self.url, timeout=5) as api:
                    api.ping()
                return
            except Exception:  # noqa: BLE001 - not up yet
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"private dockerd did not start; see {self.log}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        """Stops the engine the way a service manager does (SIGTERM), and waits."""
        if self._process is None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def copy_image(self, image: str) -> None:
        """`docker save` from the main engine into this one."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", self.url, "load", "-q"], stdin=save.stdout, check=True,
                       stdout=subprocess.DEVNULL)
        if save.wait() != 0:
            raise RuntimeError(f"docker save {image} failed")

    def containers(self) -> list[dict]:
        with docker.APIClient(base_url=self.url, timeout=30) as api:
            return api.containers(all=True)

    def fill_disk(self, leave_mb: float) -> Path:
        """Takes the data root's free space down to `leave_mb` with one file."""
        free = os.statvfs(self.mount)
        available = free.f_bavail * free.f_frsize
        filler = self.mount / "filler"
        with open(filler, "ab") as f:
            size = f.seek(0, os.SEEK_END)
            os.posix_fallocate(f.fileno(), size, max(1, available - int(leave_mb * (1 << 20))))
        if leave_mb == 0:  # fallocate leaves a block or two; take those too
            try:
                with open(self.mount / "filler-rest", "wb") as f:
                    while True:
                        f.write(b"\0" * 4096)
                        f.flush()
            except OSError:
                pass
        return filler

    def free_disk(self) -> None:
        for name in ("filler", "filler-rest"):
            (self.mount / name).unlink(missing_ok=True)
