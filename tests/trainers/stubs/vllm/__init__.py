"""Stub of vllm (see STUBS in tests/trainers/environment.py): OpenRLHF imports it at
module level on the reward and agent paths; the tests stand in for the LLM itself."""

__version__ = "0.0.0+stub"


class SamplingParams:
    """The fields OpenRLHF sets and its executors read (max_tokens, logprobs...)."""

    def __init__(self, **fields):
        self.logprobs = None
        self.max_tokens = None
        self.__dict__.update(fields)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (), {"__init__": _unavailable})


def _unavailable(*args, **kwargs):
    raise RuntimeError("vllm is a stub in the trainers tier (no GPU here)")
