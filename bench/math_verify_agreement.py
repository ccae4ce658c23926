"""How often MathReward agrees with the cases Math-Verify's own test suite
asserts, beside math-verify alone on the same cases.

    .venv/bin/python bench/math_verify_agreement.py [--show-disagreements]

The cases are the (gold, prediction, expected) rows Math-Verify's tests assert,
with the options their test passes, read by bench/math_verify_cases.py from the
tests in math-verify's sdist on PyPI (the installed version's, downloaded into
bench/.cache by `make install`). Each is run twice:
    math-verify  parse both sides and verify, as the suite's test does: its
                 helper's extraction (LaTeX with boxes first, and/or plain
                 expressions) and verify's options; or parse and verify with
                 no options where the test calls them so
    MathReward   the prediction as the completion, the gold plus the case's
                 options as a math label
A case agrees when the verdict is the expected one. Then both again with the
options left out (math-verify's defaults: parse and verify with no options; a
label of the gold answer alone).
"""

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).parent))

import math_verify_cases  # noqa: E402

from rewardbox.rewards.base import Sample  # noqa: E402
from rewardbox.rewards.math import MathConfig, MathReward  # noqa: E402


def load_cases(sdist: Path | None = None) -> list[dict[str, Any]]:
    """The cases of the installed math-verify's sdist (FileNotFoundError, saying to run `make install`, without it)."""
    return math_verify_cases.load(sdist)["cases"]


def without_options(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases with their test's options left out: math-verify's defaults on both sides."""
    return [{**case, "via": "parse", "options": {}} for case in cases]


def label(case: dict[str, Any]) -> dict[str, Any]:
    """The math label a dataset would write for the case: its gold answer and its options."""
    return {"answer": case["gold"], **case["options"]}


def math_verify_verdict(case: dict[str, Any]) -> bool:
    """math-verify's own verdict, reached the way the case's test reaches it."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    options = case["options"]
    if case["via"] == "parse":
        return bool(verify(parse(case["gold"]), parse(case["pred"])))
    targets = [LatexExtractionConfig(boxed_match_priority=0) if kind == "latex" else ExprExtractionConfig()
               for kind in options["match_types"]]
    return bool(verify(parse(case["gold"], targets), parse(case["pred"], targets), float_rounding=options["precision"],
                       strict=options["strict"], allow_set_relation_comp=options["allow_set_relation_comp"]))


def our_verdicts(cases: list[dict[str, Any]], reward: MathReward) -> list[bool | None]:
    """MathReward's verdicts (None: the label was found unusable)."""
    outputs = reward.score_many(Sample(completion=case["pred"], label=label(case)) for case in cases)
    return [None if output.score is None else output.score == 1.0 for output in outputs]


def agreement(cases: list[dict[str, Any]], reward: MathReward) -> dict[str, Any]:
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its notes on its own timeouts
    theirs = [math_verify_verdict(case) for case in cases]
    ours = our_verdicts(cases, reward)
    return {
        "cases": len(cases),
        "math_verify": sum(verdict == case["expected"] for verdict, case in zip(theirs, cases)),
        "ours": sum(verdict == case["expected"] for verdict, case in zip(ours, cases)),
        "ours_wrong": [case["id"] for verdict, case in zip(ours, cases) if verdict != case["expected"]],
        "math_verify_wrong": [case["id"] for verdict, case in zip(theirs, cases) if verdict != case["expected"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show-disagreements", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sdist", type=Path, help="default: the installed version's, in bench/.cache")
    args = parser.parse_args()
    cases = load_cases(args.sdist)
    with MathReward(MathConfig(workers=args.workers)) as reward:
        for title, run in (("with each test's options", cases), ("options left out", without_options(cases))):
            result = agreement(run, reward)
            print(f"{title}: MathReward agrees on {result['ours']}/{result['cases']}; "
                  f"math-verify alone on {result['math_verify']}/{result['cases']}")
            if args.show_disagreements:
                by_id = {case["id"]: case for case in run}
                for who in ("ours_wrong", "math_verify_wrong"):
                    for case_id in result[who]:
                        case = by_id[case_id]
                        print(f"  {who}: {case_id} expected={case['expected']} gold={case['gold'][:80]!r} "
                              f"pred={case['pred'][-120:]!r} options={case['options']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
