"""Failures of ours raise a SandboxError that says how to fix it."""

import pytest

from sandbox import EngineUnavailable, ImageMissing, Sandbox
from sandbox.engine import DockerEngine


def test_unreachable_engine_names_the_fix(tmp_path):
    with pytest.raises(EngineUnavailable, match="start a Docker engine"):
        DockerEngine(base_url=f"unix://{tmp_path}/no-engine.sock", retry_s=0.5)


def test_missing_image_names_make_sandbox_image():
    with pytest.raises(ImageMissing, match="make sandbox-image"):
        Sandbox(image="rewardbox/python:no-such-version", sweep=False)
