"""rewards/labels.py split by job: normalisation (`labels`), the formats and
the tests they generate (`label_formats`), the syntax-tree analysis
(`label_syntax`); every public label name still imports from `labels`."""

import ast
import inspect
from types import ModuleType

from rewardbox.rewards import label_formats, label_syntax, labels


def test_every_public_name_imports_from_labels_as_the_same_object():
    for name in labels.__all__:
        assert hasattr(labels, name), name
    for name in ("AssertLabel", "CallLabel", "CheckLabel", "CodeLabel", "Label", "LabelError", "MathLabel",
                 "PytestLabel", "StdioLabel", "TEST_FILE"):
        assert getattr(labels, name) is getattr(label_formats, name), name


def _imported_modules(module: ModuleType) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    return {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names} | {
        node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}


def test_each_module_keeps_to_its_job():
    # Normalising a dataset's label reads JSON, not syntax trees; the formats
    # generate tests from the analysis, which itself knows no label.
    assert "ast" not in _imported_modules(labels)
    assert "rewardbox.rewards.label_syntax" not in _imported_modules(labels)
    assert not {"rewardbox.rewards.labels", "rewardbox.rewards.label_formats", "pydantic"} & _imported_modules(label_syntax)
    assert "rewardbox.rewards.labels" not in _imported_modules(label_formats)


def test_a_check_label_is_planned_by_the_syntax_module():
    plan = label_syntax.plan_check("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n",
                                   "f", None)
    assert len(plan.cases) == 2
    label = labels.parse_label({"test": "def check(candidate):\n    assert candidate(1) == 2\n", "entry_point": "f"})
    assert isinstance(label, label_formats.CheckLabel) and label.expected.total == 1
