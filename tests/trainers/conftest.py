"""Trainers tier: the trainers' own released code calling our adapters, against
real containers on a real engine and `rewardbox serve` over a real socket.

Runs in `.venv-trainers` (tests/trainers/environment.py); `make test` builds it.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.trainers.environment import NO_DEPS, SIDE, STUB_DIR, side_dir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV = Path(sys.prefix)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.trainers)


def pytest_sessionstart(session):
    if not (VENV / ".built").exists():
        raise pytest.UsageError(f"the trainers tier runs in .venv-trainers (make trainers-env); this is {sys.prefix}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def release_env(dist: str, version: str, *, stubs: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a process that imports release `version` of `dist`:
    the installed one, or its side directory first on the path; the GPU-only
    stubs too when asked. Extra variables (REWARDBOX_*) are added."""
    paths = []
    if NO_DEPS.get(dist) != version:
        if version not in SIDE.get(dist, ()):
            raise ValueError(f"{dist}=={version} is not in tests/trainers/environment.py")
        paths.append(str(side_dir(VENV, dist, version)))
    if stubs:
        paths.append(str(STUB_DIR))
    paths.append(str(ROOT))
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@contextmanager
def rewardbox_serve(*args: str, env: dict[str, str] | None = None, ready_s: float = 60) -> Iterator[str]:
    """`rewardbox serve` as a user starts it, on a loopback port; yields its
    base URL once `/healthz` answers 200, and stops it with SIGINT (as Ctrl-C)."""
    port = free_port()
    log = open(HERE / f".serve-{port}.log", "w+")  # noqa: SIM115 - read back on failure
    process = subprocess.Popen([str(VENV / "bin" / "rewardbox"), "serve", "--host", "127.0.0.1", "--port", str(port), *args],
                               stdout=log, stderr=subprocess.STDOUT, env=env or os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"rewardbox serve exited {process.returncode}: {_tail(log)}")
            try:
                if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"rewardbox serve was not healthy within {ready_s} s: {_tail(log)}")
            time.sleep(0.2)
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        Path(log.name).unlink(missing_ok=True)


def _tail(log, chars: int = 4000) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-chars:]


def byte_level_bpe(texts: list[str], special_tokens: list[str], vocab_size: int = 400, **named_tokens: str):
    """A byte-level BPE tokenizer (as Qwen's: decodes exactly what it encodes),
    trained here on `texts` (no hub); `named_tokens` are `eos_token=` and the like."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **named_tokens)
