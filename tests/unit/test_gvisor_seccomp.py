"""The seccomp profile of gVisor's containers (rewardbox.sandbox.gvisor_seccomp):
clone3 reaches gVisor (which answers ENOSYS, so glibc's threads fall back to
clone), what Docker's profile refuses for a program graded here stays refused,
and only gVisor's containers get it, with RLIMIT_NPROC at the pids limit."""

import json

import pytest

from rewardbox.sandbox.engine import DockerEngine
from rewardbox.sandbox.gvisor_seccomp import GVISOR_SECCOMP, gvisor_seccomp_option
from rewardbox.sandbox.models import Limits


def refused() -> set[str]:
    return {name for rule in GVISOR_SECCOMP["syscalls"] if "args" not in rule for name in rule["names"]}


def test_clone3_and_plain_clone_reach_gvisor():
    assert GVISOR_SECCOMP["defaultAction"] == "SCMP_ACT_ALLOW"
    assert "clone3" not in refused() and "clone" not in refused()
    namespace_rules = [rule for rule in GVISOR_SECCOMP["syscalls"] if rule["names"] == ["clone"]]
    flags = {arg["value"] for rule in namespace_rules for arg in rule["args"]}
    assert flags == {0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000}
    assert all(arg["op"] == "SCMP_CMP_MASKED_EQ" and arg["value"] == arg["valueTwo"]
               for rule in namespace_rules for arg in rule["args"])


@pytest.mark.parametrize("name", ["unshare", "setns", "mount", "keyctl", "bpf", "ptrace", "process_vm_readv",
                                  "syslog", "userfaultfd", "init_module", "reboot", "perf_event_open"])
def test_what_docker_s_profile_refuses_a_graded_program_stays_refused(name):
    assert name in refused()


class _Made(Exception):
    """The host config is made: the test has what it needs."""


class _RecordingAPI:
    def __init__(self):
        self.host_configs = []

    def create_host_config(self, **kwargs):
        self.host_configs.append(kwargs)
        return kwargs

    def create_container_config(self, *args, **kwargs):
        raise _Made


@pytest.mark.parametrize("gvisor", [False, True])
def test_only_gvisor_s_containers_get_it(gvisor):
    engine = DockerEngine.__new__(DockerEngine)
    api = _RecordingAPI()
    engine._api = api
    engine.owner = "test"
    engine._retry = lambda call: call()
    with pytest.raises(_Made):
        engine.create("img", Limits(), "name", runtime="runsc" if gvisor else None, gvisor=gvisor)

    options = api.host_configs[0]["security_opt"]
    assert options[0] == "no-new-privileges"
    assert options[1:] == ([gvisor_seccomp_option()] if gvisor else [])  # runc: Docker's own default profile
    if gvisor:
        assert json.loads(options[1].removeprefix("seccomp=")) == GVISOR_SECCOMP
    # RLIMIT_NPROC only under gVisor, where it counts the sandbox's own tasks (the host's pids limit
    # does not see them); under runc it would count the uid's processes in every container.
    nproc = [u for u in api.host_configs[0]["ulimits"] if u["Name"] == "nproc"]
    assert nproc == ([{"Name": "nproc", "Soft": 64, "Hard": 64}] if gvisor else [])
    with pytest.raises(_Made):  # a session's: each call's prlimit bounds its tasks instead
        engine.create("img", Limits(), "name", runtime="runsc" if gvisor else None, gvisor=gvisor, task_limit=False)
    assert not [u for u in api.host_configs[1]["ulimits"] if u["Name"] == "nproc"]
