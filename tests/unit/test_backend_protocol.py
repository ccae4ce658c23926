"""Every sandbox backend, the lazy one and the unit tier's fake have what
callers use of a sandbox (`SandboxBackend`). isinstance checks the members'
presence; a static check of their signatures (mypy over the call sites) is
for later."""

import typing

import pytest

from rewardbox.sandbox import LazySandbox, Sandbox
from rewardbox.sandbox.backend import SandboxBackend
from rewardbox.sandbox.pool import PooledSandbox


def _members() -> set[str]:
    attrs = getattr(SandboxBackend, "__protocol_attrs__", None)  # Python 3.12+
    return set(attrs if attrs is not None else typing._get_protocol_attrs(SandboxBackend))  # type: ignore[attr-defined]


class _NoEngine:
    """Just enough engine for `Sandbox.__init__`: nothing is run."""

    retry_s = 1.0
    base_url = None

    def require_image(self, image: str) -> None:
        pass

    def require_runtime(self, runtime: str | None) -> bool:
        return False

    def sweep(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_protocol_names_what_callers_use():
    assert _members() == {"image", "max_containers", "run", "submit", "run_many", "stats", "probe", "close",
                          "__enter__", "__exit__"}


def test_a_cold_sandbox_is_a_backend():
    with Sandbox(engine=_NoEngine()) as box:  # type: ignore[arg-type]
        assert isinstance(box, SandboxBackend)


def test_a_lazy_sandbox_is_a_backend_before_it_starts():
    box = LazySandbox(max_containers=3)
    assert isinstance(box, SandboxBackend)
    assert not box.started


def test_the_unit_fake_is_a_backend(fake_sandbox):
    assert isinstance(fake_sandbox(), SandboxBackend)


def test_something_else_is_not():
    class RunsOnly:
        def run(self, request):
            return None

    assert not isinstance(RunsOnly(), SandboxBackend)


def test_a_pool_is_a_cold_sandbox_underneath():
    # Its members are `Sandbox`'s (checked above on an instance); making one starts containers.
    assert issubclass(PooledSandbox, Sandbox)


def test_the_ray_backend_has_every_member():
    # Built only with a cluster: its class is checked, and `image`, set by its __init__, in the source.
    import inspect

    pytest.importorskip("ray")
    from rewardbox.sandbox.ray_backend import RaySandbox

    assert {m for m in _members() - {"image"} if not hasattr(RaySandbox, m)} == set()
    assert "self.image = image" in inspect.getsource(RaySandbox.__init__)


def test_lazy_sandbox_keeps_its_public_names():
    # It moved from runner.py to modes.py (which it builds on); the names callers import stay.
    import rewardbox
    from rewardbox.sandbox import modes

    assert rewardbox.LazySandbox is LazySandbox is modes.LazySandbox
