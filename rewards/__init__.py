"""Turning completions into rewards: label formats, the code, math, format and
length rewards, composition, the registry, and (in `rewardbox.adapters`) the
trainers' interfaces."""

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.code import CodeReward
from rewardbox.rewards.composite import CompositeReward
from rewardbox.rewards.correctness import CorrectnessReward
from rewardbox.rewards.expected import ExpectedTests, expected_tests
from rewardbox.rewards.extract import extract_code, strip_completion
from rewardbox.rewards.format import FormatReward, FormatSpec
from rewardbox.rewards.grade import Grade, grade, grade_no_code
from rewardbox.rewards.label_formats import (
    AssertLabel,
    CallLabel,
    CheckLabel,
    Label,
    LabelError,
    MathLabel,
    PytestLabel,
    StdioLabel,
)
from rewardbox.rewards.labels import parse_label
from rewardbox.rewards.length import LengthReward, LengthSpec
from rewardbox.rewards.math import MathConfig, MathReward, extract_answer
from rewardbox.rewards.policy import GradingPolicy
from rewardbox.rewards.registry import FunctionReward, Registry, UnknownRewardError, configured_registry, resolve, reward

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
