"""Writes rollouts.jsonl: a small, realistic set of completions for `make demo`.

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


def main() -> None:
    path = Path(__file__).with_name("rollouts.jsonl")
    with path.open("w") as f:
        for rollout_id, tests, completion in ROLLOUTS:
            f.write(json.dumps({"id": rollout_id, "completion": completion, "label": {"pytest": tests}}) + "\n")
    print(f"wrote {len(ROLLOUTS)} rollouts to {path}")


if __name__ == "__main__":
    main()
