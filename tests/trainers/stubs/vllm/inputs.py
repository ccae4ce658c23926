"""Stub: vllm's TokensPrompt is a TypedDict, so a call returns a plain dict."""

from typing import Any, TypedDict


class TokensPrompt(TypedDict, total=False):
    prompt_token_ids: list[int]
    multi_modal_data: Any
