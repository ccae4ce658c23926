"""A reused container's sandbox that crashed under a run (InheritedCrash: what
an earlier run may have left) gets the run made once more, in a container that
has served no run; a second crash is the run's own, graded as it ended. The
runs are scripted here; the pool's side, on gVisor, is
tests/docker/test_gvisor.py."""

from rewardbox.sandbox.models import RunRequest, RunResult, Verdict
from rewardbox.sandbox.runner import InheritedCrash, Sandbox

KILLED = RunResult(verdict=Verdict.KILLED, message="the harness did not report (container exit code 2)")
PASSED = RunResult(verdict=Verdict.PASSED, message="the run's own")


class Engine:
    retry_s = 30.0
    stats = type("Stats", (), {"errors": 0, "retries": 0})()

    def require_image(self, image):
        pass

    def require_runtime(self, runtime):
        return True


class ScriptedSandbox(Sandbox):
    """Each run's outcome from a script: a result, or an exception to raise."""

    def __init__(self, script):
        super().__init__(engine=Engine(), sweep=False)  # type: ignore[arg-type]
        self.script = list(script)
        self.runs = 0
        self.unused: list[bool] = []  # what each run asked of its container

    def _run_once(self, request, unused=False):
        self.runs += 1
        self.unused.append(unused)
        outcome = self.script.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def crash():
    return InheritedCrash("gVisor's sandbox in pooled container 0123456789ab crashed (exit code 2)", KILLED)


def request():
    return RunRequest(files={"solution.py": "x = 1\n"}, tests={"test_solution.py": "def test_x():\n    pass\n"})


def test_after_an_inherited_crash_the_run_is_made_again_and_graded_as_it_ends():
    box = ScriptedSandbox([crash(), PASSED])
    assert box.run(request()) == PASSED
    assert box.runs == 2
    assert box.stats().run_retries == 1
    # The second run asks for a container that has served no run: another reused one
    # may hold an earlier run's leftovers too.
    assert box.unused == [False, True]


def test_a_second_crash_is_the_runs_own():
    box = ScriptedSandbox([crash(), crash(), PASSED])
    result = box.run(request())
    assert (result.verdict, result.message) == (Verdict.KILLED, KILLED.message)
    assert box.runs == 2  # no third try: a run that crashes every sandbox it meets is not run forever
    assert box.unused == [False, True]
