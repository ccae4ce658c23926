"""Turning completions into rewards: label formats, the code, math, format and
length rewards, composition, the registry, and (in `rewards.adapters`) the
trainers' interfaces."""

from rewards.base import Reward, RewardOutput, Sample
from rewards.code import CodeReward
from rewards.composite import CompositeReward
from rewards.correctness import CorrectnessReward
from rewards.expected import ExpectedTests, expected_tests
from rewards.extract import extract_code, strip_completion
from rewards.format import FormatReward, FormatSpec
from rewards.grade import Grade, grade, grade_no_code
from rewards.labels import (
    AssertLabel,
    CallLabel,
    CheckLabel,
    Label,
    LabelError,
    MathLabel,
    PytestLabel,
    StdioLabel,
    parse_label,
)
from rewards.length import LengthReward, LengthSpec
from rewards.math import MathConfig, MathReward, extract_answer
from rewards.policy import GradingPolicy
from rewards.registry import FunctionReward, Registry, UnknownRewardError, configured_registry, resolve, reward

__all__ = [
    "AssertLabel",
    "CallLabel",
    "CheckLabel",
    "CodeReward",
    "CompositeReward",
    "CorrectnessReward",
    "ExpectedTests",
    "FormatReward",
    "FormatSpec",
    "FunctionReward",
    "Grade",
    "GradingPolicy",
    "Label",
    "LabelError",
    "LengthReward",
    "LengthSpec",
    "MathConfig",
    "MathLabel",
    "MathReward",
    "PytestLabel",
    "Registry",
    "Reward",
    "RewardOutput",
    "Sample",
    "StdioLabel",
    "UnknownRewardError",
    "configured_registry",
    "expected_tests",
    "extract_answer",
    "extract_code",
    "grade",
    "grade_no_code",
    "parse_label",
    "resolve",
    "reward",
    "strip_completion",
]
