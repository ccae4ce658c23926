"""`make test`'s tiers in two lanes at once, on two Docker engines.

The main lane runs one command on the machine's engine. The second lane's
commands run one after another on a second engine of their own
(tests/docker/private_engine.py), started here with the main engine's images and
runtimes copied in. The tiers wait on containers, interpreters and trainers'
start-up much of the time: one lane alone leaves a 2-core machine idle about
half of it. Their own engines, not a shared one, because the tiers count what
is on their engine (the Ray tier: nothing running at its end; the docker tier
leaves dead owners' containers on purpose; verl's test counts the containers
of processes that ended).

    python scripts/lanes.py --main "CMD" --second "CMD" [--second "CMD" ...]

Every command runs to its end, whatever the others did; the exit status is the
first failure's. The second lane's output is kept in build/lanes/second.log and
printed once the main lane is done.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "docker"))

from private_engine import PrivateEngine  # noqa: E402  (tests/docker: the faults' tests use it too)

from rewardbox.images import image_tag  # noqa: E402
from rewardbox.sandbox.languages import LANGUAGES, PYTHON_REPOSITORY, default_image  # noqa: E402

LOG = ROOT / "build" / "lanes" / "second.log"
BRIDGE = "rblane0"
BUILT_IN_RUNTIMES = ("runc", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux")


def say(text: str) -> None:
    print(f"[lanes] {text}", flush=True)


def images() -> list[str]:
    """The images the tiers run: the lean and scientific sandbox images and each
    language's toolchain image, at this checkout's tags."""
    languages = {default_image(lang.name) for lang in LANGUAGES if lang.image != PYTHON_REPOSITORY}
    return [image_tag("python"), image_tag("scientific"), *sorted(languages)]


def runtimes() -> dict:
    """The main engine's runtimes beyond its built-in ones (gVisor's `runsc`), as
    its live configuration has them."""
    out = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], check=True, capture_output=True,
                         text=True).stdout
    return {name: {key: value for key, value in spec.items() if key in ("path", "runtimeArgs")}
            for name, spec in json.loads(out).items() if name not in BUILT_IN_RUNTIMES}


def run(command: str, env: dict | None = None, log=None) -> tuple[int, float]:
    started = time.monotonic()
    status = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, stdout=log, stderr=log).returncode
    return status, time.monotonic() - started


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} m {int(seconds % 60):02d} s"


def second_lane(commands: list[str], results: list[tuple[str, int, float]]) -> None:
    LOG.parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="rewardbox-lane-", dir="/var/tmp"))
    with open(LOG, "w") as log:
        try:
            started = time.monotonic()
            with PrivateEngine(root, disk_mb=None, bridge=BRIDGE, runtimes=runtimes()) as engine:
                lean, *others = images()
                engine.copy_images(lean)
                results.append(("second engine: start it, copy the lean image", 0, time.monotonic() - started))
                # The first command (the Ray tier) runs the lean image alone: the others
                # (about 3 GB, minutes) are copied while it runs.
                copied: list[tuple[str, int, float]] = []
                copy = threading.Thread(target=_copy, args=(engine, others, copied))
                copy.start()
                env = {**os.environ, "DOCKER_HOST": engine.url}

                def copy_done() -> None:
                    copy.join()
                    results.extend(copied)

                for number, command in enumerate(commands):
                    if number == 1:
                        copy_done()
                    log.write(f"$ {command}\n")
                    log.flush()
                    status, took = run(command, env, log)
                    results.append((command, status, took))
                if len(commands) < 2:
                    copy_done()
        except Exception as exc:  # noqa: BLE001 - the engine's start or copy: a failure of the lane, said
            results.append((f"second engine: {exc}", 1, 0.0))
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _copy(engine: PrivateEngine, images: list[str], results: list[tuple[str, int, float]]) -> None:
    started = time.monotonic()
    try:
        engine.copy_images(*images)
        results.append(("second engine: copy the other images", 0, time.monotonic() - started))
    except Exception as exc:  # noqa: BLE001 - said as the lane's failure
        results.append((f"second engine: copy the other images: {exc}", 1, time.monotonic() - started))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--main", required=True, help="the command on the machine's engine")
    parser.add_argument("--second", action="append", default=[], help="a command on the second engine (in order)")
    args = parser.parse_args()

    second: list[tuple[str, int, float]] = []
    lane = threading.Thread(target=second_lane, args=(args.second, second))
    lane.start()
    say(f"second lane on its own engine: {len(args.second)} commands, output in {LOG.relative_to(ROOT)}")
    main_status, main_took = run(args.main)
    say(f"main lane done ({minutes(main_took)}); waiting for the second")
    lane.join()
    print(LOG.read_text(errors="replace"), flush=True)

    results = [(args.main, main_status, main_took), *second]
    for command, status, took in results:
        say(f"{'ok  ' if status == 0 else 'FAIL'} {minutes(took):>9}  {command}")
    if sum(command in args.second for command, _, _ in second) < len(args.second):
        return 1  # the second engine's start or copy failed: some never ran
    return next((status for _, status, _ in results if status), 0)


if __name__ == "__main__":
    sys.exit(main())
