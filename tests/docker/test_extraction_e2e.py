"""Special tokens and think tags that are the solution's own text reach the
container intact: solutions that return `'<|im_end|>'` or read `'<think>'`
tags, wrapped the way trainers hand completions over (the end-of-turn token,
reasoning, a template that opened the reasoning, several turns), score 1.0 in
real containers; a wrong solution in the same wrapping fails, so the labels
do test the tokens.

The runs are scored in one batch, sharing the session's containers.
"""

import pytest

from rewardbox.rewards import RewardOutput, Sample

END_OF_TURN = "def end_of_turn(text=''):\n    return text + '<|im_end|>'\n"
END_OF_TURN_LABEL = {"pytest": ("from solution import end_of_turn\n\n\ndef test_token():\n"
                                "    assert end_of_turn() == '<|im_end|>'\n\n\ndef test_appended():\n"
                                "    assert end_of_turn('hi') == 'hi<|im_end|>'\n")}
ANSWER_OF = ("def answer_of(text):\n    if '</think>' in text:\n        return text.rsplit('</think>', 1)[1]\n"
             "    return '' if text.lstrip().startswith('<think>') else text\n")
ANSWER_OF_LABEL = {"tests": ["assert answer_of('<think>plan</think>42') == '42'",
                             "assert answer_of('<think>cut short') == ''",
                             "assert answer_of('no reasoning') == 'no reasoning'"]}
SOLUTIONS = {"end-of-turn": (END_OF_TURN, END_OF_TURN_LABEL), "answer-of": (ANSWER_OF, ANSWER_OF_LABEL)}

OPENS_THINK = "<|im_start|>user\nWrite the function.<|im_end|>\n<|im_start|>assistant\n<think>\n"
# wrapping -> (completion around the solution, prompt)
WRAPPINGS = {
    "fenced": (lambda code: f"Here it is:\n```python\n{code}```<|im_end|>", None),
    "plain-code": (lambda code: f"{code}<|im_end|><|endoftext|>", None),
    "reasoning": (lambda code: f"<think>\nThe tags are strings here.\n</think>\n\n```python\n{code}```<|im_end|>", None),
    "template-opened-reasoning": (lambda code: f"Keep '</think>' as text.\n</think>\n\n```python\n{code}```<|im_end|>",
                                  OPENS_THINK),
    "second-turn": (lambda code: ("```python\ndef draft():\n    pass\n```<|im_end|>\n<|im_start|>user\nThe tests fail."
                                  f"<|im_end|>\n<|im_start|>assistant\n```python\n{code}```<|im_end|>"), None),
    "llama3": (lambda code: f"<|start_header_id|>assistant<|end_header_id|>\n\n```python\n{code}```<|eot_id|>", None),
}
WRONG = {"end-of-turn": "def end_of_turn(text=''):\n    return text\n",
         "answer-of": "def answer_of(text):\n    return text.split('<think>')[0]\n"}

RUNS: dict[str, Sample] = {}
for _name, (_code, _label) in SOLUTIONS.items():
    for _wrapping, (_wrap, _prompt) in WRAPPINGS.items():
        RUNS[f"{_name}-{_wrapping}"] = Sample(completion=_wrap(_code), label=_label, prompt=_prompt)
    RUNS[f"{_name}-wrong"] = Sample(completion=WRAPPINGS["fenced"][0](WRONG[_name]), label=_label)


@pytest.fixture(scope="module")
def graded(code_reward) -> dict[str, RewardOutput]:
    return dict(zip(RUNS, code_reward.score_many(list(RUNS.values())), strict=True))


def show(out: RewardOutput) -> str:
    tests = [(t["name"], t["outcome"], (t["message"] or "")[-200:]) for t in out.metadata.get("tests", [])]
    return f"{out.reward} {out.metadata.get('verdict')} {out.metadata.get('message')!r} {tests}"


@pytest.mark.parametrize("wrapping", list(WRAPPINGS))
@pytest.mark.parametrize("name", list(SOLUTIONS))
def test_tokens_and_tags_in_strings_reach_the_solution(graded, name, wrapping):
    out = graded[f"{name}-{wrapping}"]

    assert (out.reward, out.score, out.verdict) == (1.0, 1.0, "passed"), show(out)


@pytest.mark.parametrize("name", list(SOLUTIONS))
def test_the_labels_test_the_tokens(graded, name):
    out = graded[f"{name}-wrong"]

    assert out.verdict == "failed" and out.reward < 1.0, show(out)
