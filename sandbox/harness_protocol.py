"""The harness's own constants module (images/python/harness/rbprotocol.py,
shipped as package data), loaded by path: the host reads the same file the
image runs, so the two sides cannot keep diverging copies. Its own module so
that what the wire's models need (the language table) can read it without the
wire format (rewardbox.sandbox.protocol, which re-exports the constants)."""

import functools
import importlib.util
from importlib import resources
from types import ModuleType


@functools.cache
def harness_protocol() -> ModuleType:
    """The harness's rbprotocol module, loaded once.

    >>> harness_protocol().REPORT_PREFIX
    b'RBREPORT '
    """
    path = resources.files("rewardbox.images") / "python" / "harness" / "rbprotocol.py"
    spec = importlib.util.spec_from_file_location("rewardbox_harness_rbprotocol", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
