"""A compiled (or checked) language's first step: its compiler run once per
sample in the work dir, before anything else of the run. Builds on rbrun.py,
whose `handle` calls it when the request names a language (sandbox/protocol.py
WireRequest.language: the argv and environment are the host's language table's,
already filled in; nothing is substituted here).

The compiler is the completion's code as much as the program is (a header
included from anywhere, a template that never ends): it runs as the sandbox
user, with stdin empty, under its own deadline and output cap (and, for a
compiler that allows it, an address-space bound: one that fills it fails,
where filling the container's memory would end a gVisor container), and
whatever it leaves running is killed before the run goes on. The test modules
are not written yet and the test data is never on disk, so there is nothing
for it to read of them.
"""

import resource
import subprocess

import rbprotocol
import rbrun

# Past this much output (both streams) the compiler is stopped: a compile error
# anyway (a flood of template diagnostics), of which the head is kept.
OUTPUT_LIMIT_BYTES = 16 * rbprotocol.COMPILE_OUTPUT_BYTES


def compile_step(language, sweep=None):
    """Runs `language["compile"]` in the work dir; the step's record:
    {"returncode", "timed_out", "output_exceeded", "duration_s", "stdout_b64",
    "stderr_b64", "ok"}; `ok` only for a status of 0 within the deadline and cap.
    A compiler's helpers (cc1plus, a JVM's threads, a linker) and anything the
    code made it start do not live on into the run (`sweep`)."""
    memory = language.get("compile_memory_bytes")

    def bound():  # in the child, before the compiler: it and all it starts
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    run = rbrun.run_bounded(
        language["compile"], {**rbrun.child_env(), **language.get("env", {})}, subprocess.DEVNULL,
        float(language["compile_timeout_s"]), rbprotocol.COMPILE_OUTPUT_BYTES, OUTPUT_LIMIT_BYTES, sweep,
        bound if memory is not None else None)
    return {**run.record(), "ok": run.returncode == 0 and not run.timed_out and not run.output_exceeded}
