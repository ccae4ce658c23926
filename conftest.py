"""Doctests of the package's own modules (`pytest rewardbox sandbox rewards`).

Each module is imported by its installed name (`sandbox/pool.py` is
`rewardbox.sandbox.pool`): pytest's `--doctest-modules` would import it a
second time under its folder's name (`sandbox.pool`), a copy with other classes
and other module state."""

import importlib
from pathlib import Path

import pytest
from _pytest.doctest import DoctestModule

import rewardbox.adapters
import rewardbox.rewards
import rewardbox.sandbox

# Each installed package's folder, deepest first (rewards/adapters before rewards).
_PACKAGES = sorted(((Path(package.__path__[0]).resolve(), package.__name__) for package in
                    (rewardbox, rewardbox.sandbox, rewardbox.rewards, rewardbox.adapters)),
                   key=lambda entry: len(entry[0].parts), reverse=True)


def installed_name(path: Path) -> str | None:
    """The module name `path` is installed under, or None if it is not the package's."""
    path = path.resolve()
    for folder, package in _PACKAGES:
        if path.is_relative_to(folder):
            parts = path.relative_to(folder).with_suffix("").parts
            return ".".join((package, *parts)).removesuffix(".__init__")
    return None


class InstalledModuleDoctests(DoctestModule):
    def _getobj(self):
        return importlib.import_module(installed_name(self.path))


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.suffix == ".py" and file_path.name != "__main__.py" and installed_name(file_path):
        return InstalledModuleDoctests.from_parent(parent, path=file_path)
    return None
