"""In-container supervisor: writes the run's files, runs pytest (or, for a
program run, the program itself) in a child process, and reports one signed
line to the host.

It never imports the completion. Protocol (see sandbox/protocol.py on the host):

    stdin  <- one JSON object {"nonce", "files", "tests", "test_data",
              "timeout_s", "output_limit_bytes"} (+ "binary_files",
              "solution_in_process"; a program
              run adds "program", "stdin", "fetch_files"), then EOF
    stdout -> "RBREPORT <hmac-sha256(nonce, body)> <body>\n", body a JSON object

The nonce is read before any completion code runs and stays in this process,
which makes itself non-dumpable, so code under test (same uid) can neither read
it from /proc nor ptrace it: it cannot forge the report. Per-test records come
from the pytest child over a pipe, each signed with a key the child's plugin
reads before the completion is imported; unsigned or mis-signed records are
counted as tampering (see pytest_runner.py for what this does not stop).
"""

import os
import sys

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbprotocol  # noqa: E402
import rbrun  # noqa: E402


def main():
    rbrun.make_non_dumpable()
    baseline = rbrun.fingerprint(os.getpid())
    request = rbrun.read_request(sys.stdin.buffer.read())
    report = rbrun.handle(request)
    if report.get("phase") == rbprotocol.PHASE_HARNESS_ERROR and rbrun.fingerprint(os.getpid()) != baseline:
        report["harness_attacked"] = True  # the run lowered our limits (prlimit): its doing, not ours
    rbrun.write_report(request["nonce"].encode(), report)


if __name__ == "__main__":
    main()
