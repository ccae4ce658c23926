"""Program mode: a run of `python3 <file>` with its stdin, not of pytest
(SandboxFusion's run_code), and the files it was asked to fetch back. Builds
on rbrun.py, whose `handle` sends program runs here."""

import base64
import os
import stat
import sys

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbrun  # noqa: E402
import rbstack  # noqa: E402


def run_program(name, source, stdin_text, timeout_s, output_limit_bytes, fetch, sweep=None, language=None):
    """Runs `python3 /work/<name>` (already written, `source` its text) with
    `stdin_text` as its standard input; for another language, its run argv and
    environment (`language`, the wire's: compiled already, when it compiles).

    Not -I: that would also hide the program's own directory from sys.path, and
    files written beside it must import as they would under `python file.py`.
    The environment is empty anyway (-E, -s). Stdin is a memory file, not a
    pipe: no writer to deadlock against a program that prints before reading.
    What it printed (up to the output limit, both streams together) and the
    fetched files come back base64, so any bytes survive the JSON report.
    """
    if language is None:
        error = rbrun.syntax_error({name: source})  # still run: Python reports it as SandboxFusion's clients expect
        argv, env = [sys.executable, "-E", "-s", "-B", os.path.join(rbrun.WORK_DIR, name)], rbrun.child_env()
    else:
        error, argv, env = None, language["run"], {**rbrun.child_env(), **language.get("env", {})}
    stdin_fd = rbrun.memory_file((stdin_text or "").encode("utf-8", "surrogatepass"))
    try:
        # The sweep comes before fetching: nothing may change or swap the files while they are read.
        run = rbrun.run_bounded(
            argv, env, stdin_fd, timeout_s, output_limit_bytes, output_limit_bytes, sweep,
            None if language is None else rbstack.unlimited_stack)
    finally:
        os.close(stdin_fd)
    files, omitted = fetch_files(fetch, output_limit_bytes - len(run.stdout) - len(run.stderr))
    return {**run.record(), "output_bytes": run.output_bytes, "syntax_error": error, "files": files,
            "files_omitted": omitted}


def fetch_files(paths, budget):
    """The files a program run asked back, base64 by path, while they fit in
    `budget` bytes. Only regular files reached without a symlink: the harness
    reads as the same user as the program, so the program must not be able to
    point it elsewhere. Missing paths are left out, as SandboxFusion does."""
    files, omitted = {}, []
    for path in paths:
        try:
            full = rbrun.safe_path(path)
            if os.path.realpath(full) != full:
                continue
            # O_NONBLOCK: a FIFO planted under the name must not hang the harness.
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (OSError, ValueError):
            continue
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_size > budget:
                omitted.append(path)
                continue
            data = f.read(budget + 1)
        if len(data) > budget:
            omitted.append(path)
            continue
        budget -= len(data)
        files[path] = base64.b64encode(data).decode()
    return files, omitted
