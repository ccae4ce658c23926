"""Fuzz tier: Hypothesis drives generated completions, labels, CLI files and
request bodies through extraction, label parsing, grading, the CLI and the
service, against a fake sandbox. No Docker engine is needed.

Reproducible: examples are derandomized (the same ones on every run) and no
example database is written. `REWARDBOX_FUZZ_EXAMPLES=N` runs N examples per
property instead of the defaults; `REWARDBOX_FUZZ_RANDOM=1` draws fresh random
examples on each run (for exploring locally, not for CI).
"""

import os
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

# The fake sandbox lives in the unit tier's conftest; make `tests.unit.conftest`
# importable however pytest was started (`python -m pytest` or `pytest`).
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# Hypothesis's caches (constants found in the code under test) go outside the repository.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir(), "rewardbox-hypothesis"))

settings.register_profile(
    "rewardbox-fuzz",
    deadline=None,  # timing is asserted per byte by the properties that promise it, on CPU time
    derandomize=os.environ.get("REWARDBOX_FUZZ_RANDOM") != "1",
    database=None,  # no .hypothesis directory in the repository
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                           HealthCheck.filter_too_much],
)
settings.load_profile("rewardbox-fuzz")
