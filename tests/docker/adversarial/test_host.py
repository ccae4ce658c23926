"""Host attacks: reading the host's files and environment, the network,
writing outside the work dir, tampering with the harness or the tests, and
symlinks that point the grader's reads elsewhere.

Isolation is shown from inside the container: the completion is the
attacker and the label's tests (ours) assert that each attempt came to
nothing, so PASSED means every defence held. The `batch` fixture then checks
the host itself: the canary file unchanged, no file of the run outside the
container, this process's secret nowhere in what came back, nothing left
behind. Traffic goes only to loopback, or to another address only after the
same test proved there is no interface but `lo`.
"""

import base64
import socket
import time

import pytest

from adversarial.attacks import (
    ESCAPE_NAME,
    FORMATS,
    GVISOR,
    HONEST_RIGHT,
    HONEST_WRONG,
    POOLED_RUNC,
    QUICK,
    SECRET_NAME,
    Attack,
    show,
)
from adversarial.conftest import CANARY
from rewardbox.sandbox import Outcome, RunRequest, Verdict

pytestmark = pytest.mark.core


def isolation(tests: str, completion: str) -> Attack:
    return Attack(completion, {"pytest": "import os\n\nimport solution\n\n" + tests})


HOST_FILES = isolation(f'''
def test_the_hosts_files_are_not_there():
    assert solution.read({str(CANARY)!r}) == "FileNotFoundError"
    assert solution.read("/proc/1/root" + {str(CANARY)!r}) in ("FileNotFoundError", "PermissionError")

def test_no_secret_in_any_environment():
    for path, text in solution.ENVIRONMENTS.items():
        assert {SECRET_NAME!r} not in text and "s3cret-" not in text, path
    allowed = {{"PATH", "HOME", "TMPDIR", "LANG", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}}
    assert {{k for k in os.environ if not k.startswith("PYTEST_")}} <= allowed, sorted(os.environ)

def test_own_hostname():
    assert solution.read("/etc/hostname").strip() == "sandbox"

def test_host_backed_mounts_are_read_only():
    for line in solution.read("/proc/self/mountinfo").splitlines():
        fields = line.split()
        source = fields[fields.index("-") + 2]
        if source.startswith("/dev/"):  # a host block device: the image's layers, docker-init, /etc/hostname
            assert fields[5].split(",")[0] == "ro", line
''', '''\
import glob

def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as exc:
        return type(exc).__name__

ENVIRONMENTS = {path: read(path) for path in glob.glob("/proc/[0-9]*/environ")}
ENVIRONMENTS["os.environ"] = repr(dict(__import__("os").environ))
''')

ENGINE_SOCKET = isolation('''
import stat

def test_no_engine_socket_at_its_usual_paths():
    for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
                 "/var/run/docker", "/run/docker"):
        assert not os.path.exists(path), path

def test_no_unix_socket_file_anywhere():
    assert solution.socket_files() == []

def test_no_engine_among_the_unix_sockets_this_namespace_sees():
    with open("/proc/net/unix") as f:
        text = f.read()
    assert "docker" not in text and "containerd" not in text, text
''', '''\
import os
import stat

def socket_files():
    found = []
    for root, dirs, files in os.walk("/"):
        if root in ("/proc", "/sys"):
            dirs.clear()
            continue
        for name in files + dirs:
            try:
                if stat.S_ISSOCK(os.lstat(os.path.join(root, name)).st_mode):
                    found.append(os.path.join(root, name))
            except OSError:
                pass
    return found
''')

# Tries to leave a file in every directory it can think of and every mount point.
WRITE_OUTSIDE = isolation('''
def test_only_the_containers_own_tmpfs_mounts_take_files():
    assert solution.WRITTEN == ["/dev/shm", "/tmp", "/work"]

def test_etc_hostname_stays_as_it_was():
    assert solution.HOSTNAME_APPEND in ("OSError: EROFS", "PermissionError: EACCES")
''', f'''\
import errno
import os

NAME = {ESCAPE_NAME!r}
TARGETS = ["/", "/etc", "/usr", "/usr/local/lib/python3.11/site-packages", "/opt", "/opt/rewardbox", "/var/tmp",
           "/root", "/home", "/run", "/var/run", "/dev", "/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/proc",
           "/proc/1/root", "/proc/1/root/tmp", "/proc/1/cwd", "/work", "/tmp", "/dev/shm", "/var/lib", "/srv", "/mnt"]
with open("/proc/self/mountinfo") as f:
    TARGETS += [line.split()[4] for line in f]

def write(directory):
    try:
        with open(os.path.join(directory, NAME), "w") as f:
            f.write("escaped")
        return True
    except OSError:
        return False

# Each real directory once (/proc/1/root/tmp is /tmp).
WRITTEN = sorted({{os.path.realpath(d) for d in TARGETS if write(d)}})

def append(path):
    try:
        with open(path, "a") as f:
            f.write(NAME)
        return "written"
    except OSError as exc:
        return f"{{type(exc).__name__}}: {{errno.errorcode[exc.errno]}}"

HOSTNAME_APPEND = append("/etc/hostname")
''')

# Under gVisor a non-dumpable process's environ, fd and maps stay readable to the
# same user; its memory, where the nonce and keys live, does not.
HARNESS_TAMPERING = isolation(f"CLOSED = {('mem',) if GVISOR else ('mem', 'environ', 'fd', 'maps')!r}\n" + '''
def test_the_harness_is_read_only_and_not_ours():
    assert solution.ATTEMPTS["write supervisor.py"] in ("OSError", "PermissionError")
    assert solution.ATTEMPTS["chmod supervisor.py"] in ("OSError", "PermissionError")
    assert solution.ATTEMPTS["write pytest.ini"] in ("OSError", "PermissionError")

def test_the_supervisors_memory_fds_and_environment_are_closed():
    assert solution.SUPERVISOR is not None
    for what in CLOSED:
        assert solution.ATTEMPTS[what] == "PermissionError", what

def test_the_supervisor_cannot_be_traced():
    assert solution.ATTEMPTS["ptrace"] == -1
''', '''\
import ctypes
import glob
import os

def supervisor():
    # The single-use harness (not pid 1, docker-init, whose arguments name it
    # too), or a pooled container's pid 1.
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        with open(path, "rb") as f:
            command = f.read()
        if command.startswith((b"python3\\0-I\\0/opt/rewardbox/supervisor.py",
                               b"python3\\0-I\\0-B\\0/opt/rewardbox/pool_supervisor.py")):
            return int(path.split("/")[2])
    return None

SUPERVISOR = supervisor()
ATTEMPTS = {}

def attempt(what, action):
    try:
        ATTEMPTS[what] = action()
    except OSError as exc:
        ATTEMPTS[what] = type(exc).__name__

def write(path):
    with open(path, "a") as f:
        f.write("# tampered")

attempt("write supervisor.py", lambda: write("/opt/rewardbox/supervisor.py"))
attempt("chmod supervisor.py", lambda: os.chmod("/opt/rewardbox/supervisor.py", 0o777))
attempt("write pytest.ini", lambda: write("/opt/rewardbox/pytest.ini"))
attempt("mem", lambda: open(f"/proc/{SUPERVISOR}/mem", "rb").read(1))
attempt("environ", lambda: open(f"/proc/{SUPERVISOR}/environ", "rb").read())
attempt("fd", lambda: os.listdir(f"/proc/{SUPERVISOR}/fd"))
attempt("maps", lambda: open(f"/proc/{SUPERVISOR}/maps", "rb").read())
attempt("ptrace", lambda: ctypes.CDLL(None).ptrace(16, SUPERVISOR, 0, 0))  # PTRACE_ATTACH: -1 on failure
''')

FIND_SUPERVISOR = '''\
import glob
import os
import signal

def supervisor():
    # The single-use harness (not pid 1, docker-init, whose arguments name it
    # too), or a pooled container's pid 1.
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        with open(path, "rb") as f:
            command = f.read()
        if command.startswith((b"python3\\0-I\\0/opt/rewardbox/supervisor.py",
                               b"python3\\0-I\\0-B\\0/opt/rewardbox/pool_supervisor.py")):
            return int(path.split("/")[2])
'''

# The tests' directory belongs to the sandbox user: it can be made writable and
# its file swapped for a link. The harness's digest of the tests must neither
# hang on a FIFO nor read /dev/zero forever, and must see the swap.
SWAP_TESTS = '''\
import os
import shutil

os.chmod("/work/.tests", 0o755)
os.remove("/work/.tests/test_solution.py")
{swap}

def add(a, b):
    return a + b
'''
PASSING = "def test_small(): pass\\ndef test_zero(): pass\\ndef test_negative(): pass\\n"

ATTACKS = {
    "honest-right-pytest": Attack(HONEST_RIGHT),
    "honest-wrong-pytest": Attack(HONEST_WRONG),
    "host-files-and-environment": HOST_FILES,
    "engine-socket": ENGINE_SOCKET,
    "writing-outside-the-work-dir": WRITE_OUTSIDE,
    "harness-tampering": HARNESS_TAMPERING,
    "killing-every-process": Attack("import os, signal\n\ndef add(a, b):\n    os.kill(-1, signal.SIGKILL)\n"),
    "stopping-the-supervisor": Attack(FIND_SUPERVISOR + "\ndef add(a, b):\n    os.kill(supervisor(), signal.SIGSTOP)\n"
                                      "    return a + b\n", limits=QUICK),
    # A right answer, and a detached reader of the container's stdout (the pipe the
    # report goes through) that would take the report if it were still alive.
    "reading-the-report-pipe": Attack(
        "import os, time\n\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        try:\n            with open('/proc/1/fd/1', 'rb', buffering=0) as out:\n                while True:\n"
        "                    out.read(1)\n        except OSError:\n            pass\n"  # gVisor: EBADF
        "    os._exit(0)\n\ndef add(a, b):\n    return a + b\n"),
    "tests-file-linked-to-dev-zero": Attack(SWAP_TESTS.format(
        swap='os.symlink("/dev/zero", "/work/.tests/test_solution.py")')),
    "tests-file-replaced-by-a-fifo": Attack(SWAP_TESTS.format(swap='os.mkfifo("/work/.tests/test_solution.py")')),
    "tests-dir-linked-to-passing-tests": Attack(SWAP_TESTS.format(swap=(
        'os.rename("/work/.tests", "/work/.tests-orig")\nos.makedirs("/tmp/fake")\n'
        f'with open("/tmp/fake/test_solution.py", "w") as f:\n    f.write("{PASSING}")\n'
        'os.symlink("/tmp/fake", "/work/.tests")')).replace("return a + b", "return a - b")),
}
# The worker re-imports /work/solution.py after a crash: swapped for a link to
# the harness's own module, it imports that as the solution and gains nothing.
ATTACKS["solution-linked-to-the-harness"] = Attack(
    "import os\n\nif os.path.islink('/work/solution.py'):\n    pass\nelse:\n    os.remove('/work/solution.py')\n"
    "    os.symlink('/opt/rewardbox/rbcheck.py', '/work/solution.py')\n\ndef add(a, b):\n    os._exit(0)\n",
    FORMATS["call"])
ATTACKS["honest-wrong-call"] = Attack(HONEST_WRONG, FORMATS["call"])
ATTACKS["tests-dir-linked-to-identical-tests"] = Attack(SWAP_TESTS.format(swap=(
    'os.rename("/work/.tests", "/work/.tests-orig")\nos.makedirs("/tmp/same")\n'
    f'with open("/tmp/same/test_solution.py", "w") as f:\n    f.write({FORMATS["pytest"]["pytest"]!r})\n'
    'os.symlink("/tmp/same", "/work/.tests")')).replace(
        'os.remove("/work/.tests/test_solution.py")\n', ""))


@pytest.mark.parametrize("case", ["host-files-and-environment", "engine-socket", "writing-outside-the-work-dir",
                                  "harness-tampering"])
def test_attempt_comes_to_nothing(batch, case):
    grade = batch[case]
    assert grade.verdict is Verdict.PASSED, show(grade)
    assert [t.outcome for t in grade.tests] == [Outcome.PASSED] * grade.total


@pytest.mark.parametrize("case, verdict", [
    ("killing-every-process", Verdict.KILLED),  # the harness too (a pool's zygote): no report, or no exit status
    *([] if POOLED_RUNC else [("stopping-the-supervisor", Verdict.TIMEOUT)]),  # the host's deadline does not need the harness
])
def test_attacking_the_harness_costs_the_run(batch, case, verdict):
    grade = batch[case]
    assert grade.verdict is verdict, show(grade)
    assert grade.reward <= batch["honest-wrong-pytest"].reward


@pytest.mark.skipif(not POOLED_RUNC, reason="cold mode, gVisor: stopping the harness costs the run (the test above)")
@pytest.mark.parametrize("case", ["stopping-the-supervisor"])
def test_a_pools_harness_cannot_be_stopped(batch, case):
    """A pooled container's harness is pid 1, which takes no signal from inside:
    nothing stops, and the right answer passes as it would have anyway."""
    grade = batch[case]
    assert (grade.verdict, grade.reward) == (Verdict.PASSED, 1.0), show(grade)


@pytest.mark.parametrize("case", ["reading-the-report-pipe"])
def test_a_reader_of_the_report_pipe_is_dead_before_the_report(batch, case):
    grade = batch[case]
    assert (grade.verdict, grade.reward) == (Verdict.PASSED, 1.0), show(grade)


@pytest.mark.parametrize("case", ["tests-file-linked-to-dev-zero", "tests-file-replaced-by-a-fifo",
                                  "tests-dir-linked-to-passing-tests", "tests-dir-linked-to-identical-tests"])
def test_swapping_the_tests_for_a_link_is_tampering(batch, case):
    # Some of these are right answers: the swap alone costs the run.
    grade = batch[case]
    assert grade.verdict is Verdict.FAILED, show(grade)
    assert grade.message == "tampering detected: forged results or edited tests", show(grade)
    assert grade.reward <= batch["honest-wrong-pytest"].reward


@pytest.mark.parametrize("case", ["solution-linked-to-the-harness"])
def test_swapping_the_solution_for_a_link_gains_nothing(batch, case):
    grade = batch[case]
    assert grade.verdict is Verdict.KILLED, show(grade)  # its first call ended the worker (os._exit)
    assert grade.reward <= batch["honest-wrong-call"].reward
    assert "the solution defines no 'add'" in "".join(t.message or "" for t in grade.tests), show(grade)


def test_fetch_files_follow_no_link_out_of_the_work_dir(sandbox, leftovers):
    program = '''\
import os

os.symlink("/etc/passwd", "link.txt")
os.symlink("/etc", "etc")
os.symlink("/proc/1/environ", "environ")
os.mkfifo("fifo")
os.makedirs("sub")
os.symlink("/work/ok.txt", "sub/inner.txt")
with open("ok.txt", "w") as f:
    f.write("fine")
'''
    request = RunRequest(files={"main.py": program}, program="main.py",
                         fetch_files=("link.txt", "etc/passwd", "environ", "fifo", "sub/inner.txt", "ok.txt"))

    result = sandbox.run(request)

    assert result.verdict is Verdict.PASSED, result
    assert result.files == {"ok.txt": base64.b64encode(b"fine").decode()}
    assert leftovers() == {"containers": [], "processes": []}


@pytest.fixture
def host_listener():
    """A TCP port listening on the host's loopback, for the container to fail to reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def test_no_network(code_reward, host_listener, leftovers):
    port = host_listener.getsockname()[1]
    # The port really listens: a connection from the host itself gets through.
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    deadline = time.monotonic() + 5
    while True:
        try:
            host_listener.accept()[0].close()
            break
        except BlockingIOError:
            assert time.monotonic() < deadline, "the host's own connection never arrived"
            time.sleep(0.01)
    tests = f"""\
import socket

import solution

def only_loopback():
    return [name for _, name in socket.if_nameindex()] == ["lo"]

def test_only_loopback_interface():
    assert only_loopback()

def test_proc_net_dev_lists_only_loopback():
    with open("/proc/net/dev") as f:
        devices = [line.split(":")[0].strip() for line in f.read().splitlines()[2:]]
    assert devices == ["lo"]

def test_no_route():
    with open("/proc/net/route") as f:
        assert f.read().splitlines()[1:] == []

def test_host_port_unreachable():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", {port}))
    except OSError:
        pass
    else:
        raise AssertionError("connected to the host's port {port}")
    finally:
        s.close()

def test_no_name_resolution():
    assert only_loopback()  # so nothing this tries can leave the container
    for name in ("localhost.localdomain", "example.com", "host.docker.internal"):
        try:
            socket.getaddrinfo(name, 80)
        except OSError:
            continue
        raise AssertionError("resolved " + name)

def test_the_hosts_bridge_address_unreachable():
    assert only_loopback()  # so this packet has nowhere to go
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(("172.17.0.1", {port}))
    except OSError:
        pass
    else:
        raise AssertionError("reached the host's bridge address")
    finally:
        s.close()

def test_solution_imported():
    assert solution.READY
"""

    grade = code_reward.grade("READY = True\n", {"pytest": tests})

    assert grade.verdict is Verdict.PASSED, show(grade)
    assert grade.reward == 1.0
    assert [t.outcome for t in grade.tests] == [Outcome.PASSED] * 7
    with pytest.raises(BlockingIOError):
        host_listener.accept()  # nothing from the container reached the host
    assert leftovers() == {"containers": [], "processes": []}


def test_root_filesystem_is_read_only(code_reward):
    tests = """\
import errno
import os

import solution

# EROFS from the host kernel; gVisor's file system answers EACCES for the same mount.
REFUSED = {errno.EROFS, errno.EACCES}

def test_write_to_etc_fails():
    try:
        open("/etc/x", "w")
    except OSError as exc:
        assert exc.errno in REFUSED, exc
    else:
        raise AssertionError("wrote /etc/x")

def test_write_to_world_writable_dir_on_root_fails():
    # /var/tmp is mode 1777: only the read-only mount can refuse this.
    try:
        open("/var/tmp/x", "w")
    except OSError as exc:
        assert exc.errno in REFUSED, exc
    else:
        raise AssertionError("wrote /var/tmp/x")

def test_root_mounted_read_only():
    with open("/proc/mounts") as f:
        root = [line.split() for line in f if line.split()[1] == "/"]
    assert root and "ro" in root[-1][3].split(","), root

def test_work_dir_is_writable():
    with open("/work/scratch.txt", "w") as f:
        f.write(solution.TEXT)
    with open("/work/scratch.txt") as f:
        assert f.read() == "hello"
"""

    grade = code_reward.grade("TEXT = 'hello'\n", {"pytest": tests})

    assert grade.verdict is Verdict.PASSED, grade.tests
    assert grade.reward == 1.0
    assert [t.outcome for t in grade.tests] == [Outcome.PASSED] * 4


def test_runs_as_non_root_without_capabilities(code_reward):
    tests = """\
import ctypes
import os

import solution

PR_GET_NO_NEW_PRIVS = 39

def test_not_root():
    assert os.getuid() != 0
    assert os.geteuid() != 0
    assert os.getgid() != 0
    assert solution.uid() == os.getuid()

def test_no_capabilities_and_no_new_privileges():
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines())
    assert int(status["CapEff"], 16) == 0
    assert int(status["CapPrm"], 16) == 0
    assert status["Seccomp"].strip() == "2"
    # prctl rather than /proc/self/status, which has no NoNewPrivs line under gVisor.
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1
"""

    grade = code_reward.grade("import os\n\ndef uid():\n    return os.getuid()\n", {"pytest": tests})

    assert grade.verdict is Verdict.PASSED, grade.tests
    assert grade.reward == 1.0
    assert [(t.name, t.outcome) for t in grade.tests] == [
        ("test_not_root", Outcome.PASSED),
        ("test_no_capabilities_and_no_new_privileges", Outcome.PASSED),
    ]
