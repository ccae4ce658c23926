"""Writes rollouts.jsonl (pytest labels, for `make demo`) and mixed.jsonl
(every other label format, code and math in one file): small, realistic sets
of completions.

Run `python examples/make_rollouts.py` after editing; the JSONL is committed.
"""

import json
from pathlib import Path

PALINDROME_TESTS = '''from solution import is_palindrome

def test_simple():
    assert is_palindrome("racecar")

def test_not_palindrome():
    assert not is_palindrome("python")

def test_mixed_case():
    assert is_palindrome("Never odd or even")

def test_punctuation():
    assert is_palindrome("A man, a plan, a canal: Panama!")
'''

FIZZBUZZ_TESTS = '''import pytest
from solution import fizzbuzz

def test_first_fifteen():
    assert fizzbuzz(15)[-1] == "FizzBuzz"
    assert fizzbuzz(15)[:5] == ["1", "2", "Fizz", "4", "Buzz"]

@pytest.mark.parametrize("n", [0, 1, 7])
def test_length(n):
    assert len(fizzbuzz(n)) == n
'''

INTERVAL_TESTS = '''from solution import merge_intervals

def test_overlapping():
    assert merge_intervals([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]

def test_touching():
    assert merge_intervals([[1, 4], [4, 5]]) == [[1, 5]]

def test_unsorted():
    assert merge_intervals([[5, 6], [1, 2]]) == [[1, 2], [5, 6]]

def test_empty():
    assert merge_intervals([]) == []
'''

ROLLOUTS = [
    ("palindrome-pass", PALINDROME_TESTS,
     "Strip everything but letters and digits, lower-case, and compare with the reverse.\n\n"
     "```python\ndef is_palindrome(s: str) -> bool:\n"
     "    cleaned = [c.lower() for c in s if c.isalnum()]\n"
     "    return cleaned == cleaned[::-1]\n```\n\nThis runs in O(n)."),
    ("palindrome-partial", PALINDROME_TESTS,
     "```python\ndef is_palindrome(s):\n    return s == s[::-1]\n```"),
    ("palindrome-think", PALINDROME_TESTS,
     "<think>I need to ignore case and punctuation. Filter with isalnum.</think>\n"
     "```python\nimport re\n\ndef is_palindrome(s):\n"
     "    t = re.sub(r'[^0-9a-z]', '', s.lower())\n    return t == t[::-1]\n```<|im_end|>"),
    ("fizzbuzz-pass", FIZZBUZZ_TESTS,
     "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n"
     "        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n"
     "        out.append(s or str(i))\n    return out\n"),
    ("fizzbuzz-off-by-one", FIZZBUZZ_TESTS,
     "```python\ndef fizzbuzz(n):\n    return ['Fizz' * (i % 3 == 0) + 'Buzz' * (i % 5 == 0) or str(i) "
     "for i in range(1, n)]\n```"),
    ("fizzbuzz-syntax-error", FIZZBUZZ_TESTS,
     "```python\ndef fizzbuzz(n)\n    return [str(i) for i in range(1, n + 1)]\n```"),
    ("intervals-pass", INTERVAL_TESTS,
     "Sort by start, then extend the last interval while they overlap.\n\n```python\n"
     "def merge_intervals(intervals):\n    merged = []\n"
     "    for start, end in sorted(intervals):\n"
     "        if merged and start <= merged[-1][1]:\n"
     "            merged[-1][1] = max(merged[-1][1], end)\n"
     "        else:\n            merged.append([start, end])\n    return merged\n```"),
    ("intervals-loops-forever", INTERVAL_TESTS,
     "```python\ndef merge_intervals(intervals):\n    i = 0\n    while i < len(intervals):\n"
     "        if i + 1 < len(intervals) and intervals[i][1] >= intervals[i + 1][0]:\n"
     "            intervals[i][1] = max(intervals[i][1], intervals[i + 1][1])\n"
     "        # forgot to advance i\n    return intervals\n```"),
    ("intervals-memory-hog", INTERVAL_TESTS,
     "```python\ndef merge_intervals(intervals):\n    # mark every covered point in a dense table\n"
     "    covered = [False] * (10 ** 10)\n    return []\n```"),
    ("intervals-no-code", INTERVAL_TESTS,
     "I'm not sure how to merge intervals; could you give me an example of the input format?"),
]


# One rollout per label format, as the datasets ship them; math beside code.
MIXED = [
    ("mbpp-pass", "```python\ndef square_perimeter(a):\n    return 4 * a\n```",
     {"test_list": ["assert square_perimeter(10)==40", "assert square_perimeter(5)==20", "assert square_perimeter(4)==16"],
      "test_setup_code": "", "test_imports": []}),
    ("mbpp-partial", "```python\ndef square_perimeter(a):\n    return 40 if a == 10 else a * a\n```",
     {"test_list": ["assert square_perimeter(10)==40", "assert square_perimeter(5)==20", "assert square_perimeter(4)==16"]}),
    ("humaneval-continuation", "    return [x for x in strings if substring in x]\n",
     {"task_id": "HumanEval/7", "entry_point": "filter_by_substring",
      "prompt": "from typing import List\n\n\ndef filter_by_substring(strings: List[str], substring: str) -> List[str]:\n"
                "    \"\"\" Filter an input list of strings only for ones that contain given substring \"\"\"\n",
      "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([], 'john') == []\n"
              "    assert candidate(['xxx', 'asd', 'xxy', 'john doe', 'xxxAAA', 'xxx'], 'xxx') == "
              "['xxx', 'xxxAAA', 'xxx']\n    assert candidate(['grunt', 'trumpet', 'prune', 'gruesome'], 'run') == "
              "['grunt', 'prune']\n"}),
    ("apps-stdio", "<think>Read two ints, print the sum.</think>\n```python\na, b = map(int, input().split())\nprint(a + b)\n```",
     {"input_output": json.dumps({"inputs": ["1 2\n", "10 -3\n", "0 0\n"], "outputs": ["3\n", "7\n", "0\n"]})}),
    ("leetcode-call", "```python\nclass Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
                      "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
                      "                return [seen[target - x], i]\n            seen[x] = i\n```",
     {"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6], [[3, 3], 6]], "outputs": [[0, 1], [1, 2], [0, 1]]}),
    ("open-r1-loop", "```python\nwhile True:\n    pass\n```",
     {"language": "python", "test_cases": [{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}], "case_timeout_s": 1}),
    ("gsm8k", "Natalia sold 48 clips in April and half as many in May: 48 + 24 = 72.\n#### 72",
     "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether. #### 72"),
    ("math-boxed", "The probability is $\\boxed{\\frac{1}{2}}$.", {"answer": "0.5"}),
    ("math-wrong", "So the answer is 41.", "42"),
    ("bad-label", "```python\nprint(1)\n```", {"inputs": ["1\n"], "outputs": []}),
]


def main() -> None:
    here = Path(__file__).parent
    with (here / "rollouts.jsonl").open("w") as f:
        for rollout_id, tests, completion in ROLLOUTS:
            f.write(json.dumps({"id": rollout_id, "completion": completion, "label": {"pytest": tests}}) + "\n")
    with (here / "mixed.jsonl").open("w") as f:
        for rollout_id, completion, label in MIXED:
            f.write(json.dumps({"id": rollout_id, "completion": completion, "label": label}) + "\n")
    print(f"wrote {len(ROLLOUTS)} rollouts to rollouts.jsonl and {len(MIXED)} to mixed.jsonl in {here}")


if __name__ == "__main__":
    main()
