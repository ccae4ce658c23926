"""What the stub modules here share (each listed in STUBS in tests/trainers/environment.py):
any name a stub does not define is a placeholder class, which fails when used."""

from collections.abc import Callable


def placeholders(module: str) -> Callable[[str], type]:
    """A module-level `__getattr__` for the stub `module`."""

    def unavailable(*args, **kwargs):
        raise RuntimeError(f"{module} is a stub in the trainers tier (no GPU here)")

    def __getattr__(name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__init__": unavailable, "__module__": module})

    return __getattr__
