"""`extract_code(..., language=...)`: the code of a completion in each language
of the table; Python's own result stays what it was."""

import pytest

from rewardbox.rewards import extract_code
from rewardbox.sandbox import LANGUAGES, UnknownLanguage

CPP = "#include <cstdio>\nint main() { puts(\"hi\"); }\n"
PY = "print('hi')\n"
JAVA = "public class Main {\n    public static void main(String[] a) {}\n}\n"
GO = "package main\n\nfunc main() {}\n"
RUST = "fn main() {\n    println!(\"hi\");\n}\n"
JS = "console.log('hi');\n"


@pytest.mark.parametrize("language, completion, code", [
    pytest.param("cpp", f"Here:\n```cpp\n{CPP}```\nDone.", CPP, id="cpp-tag"),
    pytest.param("cpp", f"```C++\n{CPP}```", CPP, id="c++-tag-any-case"),
    pytest.param("cpp", f"```cc\n{CPP}```", CPP, id="cc-tag"),
    pytest.param("cpp", f"```cpp17\n{CPP}```", CPP, id="cpp17-tag"),
    pytest.param("c++", f"```cpp\n{CPP}```", CPP, id="language-given-by-alias"),
    pytest.param("cpp", f"```python\n{PY}```\n```cpp\n{CPP}```\n```python\n{PY}```", CPP,
                 id="cpp-among-python"),
    pytest.param("cpp", f"First:\n```cpp\nint main() {{}}\n```\nBetter:\n```cpp\n{CPP}```", CPP, id="last-cpp-wins"),
    pytest.param("cpp", f"```\n{CPP}```", CPP, id="untagged"),
    pytest.param("cpp", f"```cpp\n{CPP}```\nOutput:\n```\nhi\n```", CPP, id="tagged-before-untagged-output"),
    pytest.param("cpp", f"```cpp\n{CPP}", CPP, id="unclosed-cut-off"),
    pytest.param("cpp", CPP, CPP, id="fence-less-with-include"),
    pytest.param("cpp", f"{CPP}<|im_end|>", CPP, id="fence-less-special-tokens-removed"),
    pytest.param("cpp", f"<think>\nuse printf\n</think>\n```cpp\n{CPP}```", CPP, id="after-reasoning"),
    pytest.param("cpp20", f"```cpp\n{CPP}```", CPP, id="cpp20-fenced-as-cpp"),
    pytest.param("cpp20", f"```c++20\n{CPP}```", CPP, id="cpp20-tag"),
    pytest.param("java", f"```java\n{JAVA}```", JAVA, id="java-tag"),
    pytest.param("java", JAVA, JAVA, id="java-fence-less"),
    pytest.param("javascript", f"```js\n{JS}```", JS, id="js-tag"),
    pytest.param("nodejs", f"```javascript\n{JS}```", JS, id="javascript-tag"),
    pytest.param("javascript", f"```node\n{JS}```", JS, id="node-tag"),
    pytest.param("go", f"```golang\n{GO}```", GO, id="golang-tag"),
    pytest.param("go", GO, GO, id="go-fence-less"),
    pytest.param("rust", f"```rs\n{RUST}```", RUST, id="rs-tag"),
    pytest.param("rust", RUST, RUST, id="rust-fence-less"),
])
def test_the_language_s_code_is_found(language, completion, code):
    assert extract_code(completion, language=language) == code


@pytest.mark.parametrize("language, completion", [
    pytest.param("cpp", f"```python\n{PY}```", id="cpp-but-only-python"),
    pytest.param("cpp20", f"```python\n{PY}```", id="cpp20-but-only-python"),
    pytest.param("java", f"```cpp\n{CPP}```", id="java-but-only-cpp"),
    pytest.param("cpp", "I would include a header and write the main function.", id="cpp-prose"),
    pytest.param("cpp", PY, id="cpp-but-fence-less-python"),
    pytest.param("javascript", JS, id="js-fence-less-never"),
    pytest.param("go", "```go\n```", id="empty-fence"),
    pytest.param("rust", "<think>\nfn main() {}", id="only-unclosed-reasoning"),
])
def test_no_code_of_the_language(language, completion):
    assert extract_code(completion, language=language) is None


@pytest.mark.parametrize("completion", [
    f"```python\n{PY}```\n```cpp\n{CPP}```",
    f"```cpp\n{CPP}```",
    PY,
    "def f(x):\n    return x +\n",
    "I cannot solve this.",
    f"```\n{PY}```",
])
@pytest.mark.parametrize("python", ["python", "Python", "py", "python3"])
def test_python_by_any_of_its_names_is_the_default(completion, python):
    assert extract_code(completion, language=python) == extract_code(completion)


def test_python_is_not_cpp():
    completion = f"```python\n{PY}```\n```cpp\n{CPP}```"
    assert (extract_code(completion), extract_code(completion, language="cpp")) == (PY, CPP)


def test_an_unknown_language_is_refused():
    with pytest.raises(UnknownLanguage, match="unknown language 'cobol'"):
        extract_code("```cobol\nDISPLAY 'HI'.\n```", language="cobol")


HOSTILE = {
    "spaces-after-int": "int" + " \t" * 500_000,
    "many-ints": "int " * 250_000,
    "hash-then-spaces": "#" + " " * 1_000_000,
    "indented-lines": "   \n" * 250_000,
    "public-modifiers": "public final abstract " * 50_000 + "x",
    "fn-spaces": "fn" + " " * 1_000_000 + "x",
    "package-spaces": "package" + " " * 1_000_000,
    "static-void": "static void " * 80_000,
    "class-lines": "class \n" * 150_000,
}


@pytest.mark.timeout(20)
@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_megabyte_of_hostile_text_is_read_in_linear_time_in_every_language(text):
    for lang in LANGUAGES:
        found = extract_code(text, language=lang)
        assert found is None or found.strip()
        assert lang.source_name(text) == lang.source  # no public class in any of them
