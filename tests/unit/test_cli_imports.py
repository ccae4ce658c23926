"""What `rewardbox score` loads on its way to the first sample: nothing it
does not use there (issue 21: the command line's fixed cost). Each import
below costs the start of every run; tqdm is loaded only for a bar shown on a
terminal."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Not used by a score run without a terminal: the bar, the web service and its server, math's checker in this process.
NOT_ON_THE_SCORE_PATH = ("tqdm", "fastapi", "starlette", "uvicorn", "math_verify")


def test_a_score_run_without_a_terminal_imports_no_bar_and_no_service(tmp_path):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"id": 1, "completion": "```python\nx = 1\n```", "label": 1}) + "\n")
    # The format reward: no engine needed, so this runs in the unit tier; the score path is the same.
    code = ("import sys; from rewardbox.cli import main; "
            f"status = main(['score', {str(rollouts)!r}, '-o', {str(tmp_path / 'out.jsonl')!r}, "
            "'-r', 'format_one_code_block']); "
            f"print(status, sorted(m for m in {NOT_ON_THE_SCORE_PATH!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 []", done.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["reward"] == 1.0
