"""The trainers tier's environment: every trainer release it drives, pinned here and nowhere else.

`make trainers-env` runs `python tests/trainers/environment.py .venv-trainers`:
a virtualenv of its own (the trainers' dependencies clash with each other and
with ours), holding rewardbox (editable), torch pinned as for the main venv,
the trainers below, and `side/<dist>-<version>/` directories for the other
releases of a trainer, which a test puts first on the `PYTHONPATH` of the
process that drives that release. Every transitive version is pinned by
`tests/trainers/constraints.txt` (regenerate it with `--freeze` after a pin
changes). The build is skipped when nothing it depends on changed.

Trainers that pull GPU-only packages are installed without their
dependencies; the modules they import at the call sites we drive are in
`SUPPORT`, and the GPU-only ones they import without using are stubbed in
`tests/trainers/stubs/` (each listed in `STUBS`, put on the path only by the
tests that need them).
"""

import argparse
import hashlib
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONSTRAINTS = HERE / "constraints.txt"
STUB_DIR = HERE / "stubs"

TORCH = "torch==2.13.0"  # a newer or unpinned torch downloads gigabytes of CUDA wheels

# Installed with their dependencies (resolved under CONSTRAINTS).
WITH_DEPS: dict[str, str] = {
    "trl": "1.16.0",
}

# The newest release of each trainer we drive whose dependencies cannot install
# here (CUDA builds: vllm, flash-attn, deepspeed...): the package alone.
NO_DEPS: dict[str, str] = {
    "openrlhf": "0.11.2",
    "verl": "0.9.1",
    "twinkle-kit": "0.5.1",
}

# Other releases, each into side/<dist>-<version>/ with --no-deps (the oldest we claim, and
# those whose behaviour differs).
SIDE: dict[str, tuple[str, ...]] = {
    # 0.10.0: the last release that reads `scores or rewards` (0.9.1-0.10.0); 0.9.1: the only one
    # whose MultiTurnAgentExecutor runs every episode on one agent instance (0.9.1.post1 fixed it).
    "openrlhf": ("0.10.1", "0.10.0", "0.9.10", "0.9.1", "0.9.0", "0.8.11"),
    # 1.9.0: the first that names a reward by unwrapping functools.partial; 1.8.0: the last by `__name__`;
    # 0.29.1: `asyncio.iscoroutinefunction`, as 0.27.0 (the first async rewards), the oldest that runs on our transformers.
    "trl": ("1.9.0", "1.8.0", "0.29.1"),
}

# What the NO_DEPS trainers import on the paths we drive, installed with their
# dependencies (resolved under CONSTRAINTS).
SUPPORT: tuple[str, ...] = (
    "aiohttp",  # openrlhf >= 0.9.1: openrlhf.utils.agent (the HTTP reward client)
    "pylatexenc",  # openrlhf 0.9.10 and later: openrlhf.utils.math_utils, imported by openrlhf.utils
    "ray",  # openrlhf: remote_rm_utils (0.8-0.9.0 run reward_func in Ray tasks), samples_generator
    "peft==0.19.0",  # openrlhf 0.8-0.9.0: openrlhf.models, imported by experience_maker (twinkle-kit wants <=0.19)
    "torchdata==0.11.0",  # openrlhf 0.8-0.9.0: openrlhf.utils.deepspeed, imported by experience_maker
    # verl 0.9.1 imports ray (verl.protocol) and aiohttp (reward loop) too, and:
    "codetiming==1.4.0",  # verl.utils.profiler, imported by verl.utils.reward_score's package
    # verl's configs (reward managers take a DictConfig); 2.4 needs no antlr4 4.9, which math-verify's 4.13 excludes
    "omegaconf==2.4.0",
    "tensordict==0.8.3",  # verl.protocol's DataProto; 0.9+ pins packaging<26, which the constraints exclude
    "pillow==13.0.0",  # twinkle-kit 0.5.1: twinkle.template (qwen3_5_vl), imported by twinkle.dataset and its Template
)

# GPU-only modules imported (never called) on those paths: tests/trainers/stubs/<module>, and why.
STUBS: dict[str, str] = {
    "deepspeed": "openrlhf 0.8-0.9.0: openrlhf.models and the strategy, imported by experience_maker (CUDA ops)",
    "flash_attn": "openrlhf 0.8-0.9.0: openrlhf.models.ring_attn_utils, imported with openrlhf.models (CUDA kernels)",
    "vllm": "openrlhf: utils.agent (0.8-0.9.0), samples_generator and trainer.ray.vllm_engine; the tests stand in"
            " for the LLM, so only SamplingParams, inputs.TokensPrompt and utils.random_uuid do anything",
}


def side_dir(venv_dir: Path, dist: str, version: str) -> Path:
    """Where release `version` of `dist` is installed, for a test's PYTHONPATH."""
    return venv_dir / "side" / f"{dist}-{version}"


def _fingerprint() -> str:
    parts = [Path(__file__).read_bytes(), CONSTRAINTS.read_bytes() if CONSTRAINTS.exists() else b"",
             (ROOT / "pyproject.toml").read_bytes()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def _pip(venv_dir: Path, *args: str) -> None:
    command = [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    print("+", " ".join(command[3:]), flush=True)
    subprocess.run(command, check=True)


def _drop_shadowing_tests(directory: Path) -> None:
    """openrlhf (0.9.10 and later) and verl wheels install a top-level `tests`
    package; on the path it shadows this repository's `tests` (a namespace
    package), so conftest could not import `tests.trainers`."""
    shutil.rmtree(directory / "tests", ignore_errors=True)


def build(venv_dir: Path, freeze: bool = False) -> None:
    stamp = venv_dir / ".built"
    if not freeze and stamp.exists() and stamp.read_text() == _fingerprint():
        print(f"{venv_dir}: up to date")
        return
    if not (venv_dir / "bin" / "python").exists():
        venv.create(venv_dir, with_pip=True)
    constraints = [] if freeze or not CONSTRAINTS.exists() else ["-c", str(CONSTRAINTS)]
    _pip(venv_dir, *constraints, "-e", f"{ROOT}[test]", TORCH,
         *(f"{dist}=={version}" for dist, version in WITH_DEPS.items()), *SUPPORT)
    _pip(venv_dir, "--no-deps", *(f"{dist}=={version}" for dist, version in NO_DEPS.items()))
    for dist, versions in SIDE.items():
        for version in versions:
            target = side_dir(venv_dir, dist, version)
            if not target.exists():
                _pip(venv_dir, "--no-deps", "--target", str(target), f"{dist}=={version}")
            _drop_shadowing_tests(target)
    for site in (venv_dir / "lib").glob("python3*/site-packages"):
        _drop_shadowing_tests(site)
    if freeze:
        frozen = subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "freeze", "--exclude-editable",
                                 "--disable-pip-version-check"], check=True, capture_output=True, text=True).stdout
        header = "# Exact versions of the trainers tier's environment (tests/trainers/environment.py --freeze).\n"
        CONSTRAINTS.write_text(header + "".join(line + "\n" for line in frozen.splitlines()
                                                if line.split("==")[0].lower() not in {d.lower() for d in NO_DEPS}))
        print(f"wrote {CONSTRAINTS}")
    stamp.write_text(_fingerprint())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("venv", type=Path, help="the virtualenv to build, e.g. .venv-trainers")
    parser.add_argument("--freeze", action="store_true", help="resolve without constraints, then write constraints.txt")
    args = parser.parse_args()
    build(args.venv.resolve(), freeze=args.freeze)


if __name__ == "__main__":
    sys.exit(main())
