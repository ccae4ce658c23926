"""Stub of vllm (see STUBS in tests/trainers/environment.py): OpenRLHF imports it at
module level on the reward and agent paths; the tests stand in for the LLM itself."""

from _placeholders import placeholders

__version__ = "0.0.0+stub"


class SamplingParams:
    """The fields OpenRLHF sets and its executors read (max_tokens, logprobs...)."""

    def __init__(self, **fields):
        self.logprobs = None
        self.max_tokens = None
        self.__dict__.update(fields)


__getattr__ = placeholders(__name__)
