"""Turning sandbox results into rewards."""

from rewards.code import CodeReward, Sample
from rewards.expected import ExpectedTests, expected_tests
from rewards.extract import extract_code, strip_completion
from rewards.grade import Grade, grade, grade_no_code, ungradable
from rewards.labels import Label, LabelError, PytestLabel, parse_label
from rewards.policy import GradingPolicy

__all__ = [
    "CodeReward",
    "ExpectedTests",
    "Grade",
    "GradingPolicy",
    "Label",
    "LabelError",
    "PytestLabel",
    "Sample",
    "expected_tests",
    "extract_code",
    "grade",
    "grade_no_code",
    "parse_label",
    "strip_completion",
    "ungradable",
]
