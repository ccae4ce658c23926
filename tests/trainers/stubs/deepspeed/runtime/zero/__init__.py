"""Stub: see STUBS in tests/trainers/environment.py. Any name is a placeholder class that fails if used."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (), {"__init__": _unavailable})


def _unavailable(*args, **kwargs):
    raise RuntimeError(f"{__name__} is a stub in the trainers tier (no GPU here)")

