"""The constants of the protocol between the host and this harness, written
down once. Stdlib only, no imports: the harness imports it, and the host loads
this same file from its package data (rewardbox.sandbox.protocol), so neither
side keeps a copy the other could drift from.

A report is one line on the container's stdout:

    REPORT_PREFIX <hmac-sha256(nonce, body)> <body>

body a JSON object with "version" == PROTOCOL_VERSION and "phase" one of
PHASES; a pooled container first writes READY once its zygote is warm.
"""

# Sent as the report's "version"; the host refuses any other as a failure of ours.
PROTOCOL_VERSION = 2

READY = b"RBREADY\n"  # unsigned: it only says the zygote has warmed up
REPORT_PREFIX = b"RBREPORT "

HARNESS_DIR = "/opt/rewardbox"
WORK_DIR = "/work"
SOLUTION_FILE = "solution.py"
SOLUTION_PATH = f"{WORK_DIR}/{SOLUTION_FILE}"
# The unprivileged user the code under test runs as (the image's 'sandbox').
SANDBOX_UID = 10001
SANDBOX_GID = 10001

# The report's "phase": how far the run got.
PHASE_SYNTAX = "syntax"  # the completion did not compile; no test ran
PHASE_COMPILE = "compile"  # another language's compile (or check) step failed; nothing ran
PHASE_PYTEST = "pytest"  # the tests ran (records say how)
PHASE_PROGRAM = "program"  # a program run (no tests)
PHASE_HARNESS_ERROR = "harness_error"  # the harness failed: ours, unless the run attacked it
PHASES = (PHASE_SYNTAX, PHASE_COMPILE, PHASE_PYTEST, PHASE_PROGRAM, PHASE_HARNESS_ERROR)

# A compile step's output kept for the report (both streams together): the
# head of a compiler's message is what a person and a model read.
COMPILE_OUTPUT_BYTES = 64 << 10
