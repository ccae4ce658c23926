"""Running a script inside the sandbox image (as the sandbox user, no
network, a tmpfs work dir) for tests that compare two ways of running the
harness there; and the script's shared part: a forked child whose records
are read back, made comparable."""

import json

from rewardbox.images import image_tag

# Prepended to the script: `forked(body)`, `main_in_child(...)` and `records_of(lines)`.
PRELUDE = r'''
import json, os, re, sys
sys.path.insert(0, "/opt/rewardbox")


def forked(body):
    """body(records_fd) in a child whose stdout and stderr go to /dev/null:
    its exit status and the lines it wrote to records_fd."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        code = 70
        try:
            code = body(write)
        except SystemExit as exc:
            code = exc.code
        finally:
            os._exit(int(code or 0) & 0xFF)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), data.splitlines()


def main_in_child(prepared, data_fd, test_files, before, after=lambda records: None):
    """pytest_runner.main(prepared) in a child, as a pooled run calls it (the
    key on a pipe, the test data's fd or -1, the solution in its worker):
    its exit status, its records, and the loop that ran its tests, which the
    child names in a line `loop NAME` on the records fd, written by
    `before(records_fd)` (run first) or `after(records_fd)` (run last)."""
    import pytest_runner

    key_r, key_w = os.pipe()
    os.write(key_w, b"k" * 32)
    os.close(key_w)

    def body(records):
        before(records)
        sys.argv = ["pytest_runner", str(key_r), str(records), str(data_fd), "worker", *test_files]
        try:
            pytest_runner.main(prepared)
        finally:
            after(records)

    status, lines = forked(body)
    os.close(key_r)
    loops = [line[5:].decode() for line in lines if line.startswith(b"loop ")]
    records = records_of([line for line in lines if not line.startswith(b"loop ")])
    return {"status": status, "records": records, "loop": loops[0] if loops else None}


def records_of(lines):
    """The records among `lines` (signature dropped), with what differs between
    two runs of the same tests zeroed: durations, the session's time."""
    records = []
    for line in lines:
        record = json.loads(line.split(b" ", 1)[1])
        if "duration_s" in record:
            record["duration_s"] = 0
        if "text" in record:
            record["text"] = re.sub(r"in [0-9.]+s", "in Ns", record["text"])
        records.append(record)
    return records
'''


def run_script(docker_client, script: str, argument: object, label: str, timeout_s: float = 300):
    """PRELUDE + `script` run in the image with `argument` as JSON in argv[1];
    the JSON of its last line of output."""
    container = docker_client.containers.create(
        image_tag(), ["python3", "-I", "-B", "-c", PRELUDE + script, json.dumps(argument)], user="10001:10001",
        network_mode="none", tmpfs={"/work": "rw,exec,uid=10001,gid=10001"}, labels={"rewardbox-test": label})
    try:
        container.start()
        assert container.wait(timeout=timeout_s)["StatusCode"] == 0, container.logs().decode()[-3000:]
        return json.loads(container.logs(stdout=True, stderr=False).decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)
