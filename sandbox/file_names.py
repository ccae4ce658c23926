"""The names the sandbox writes files under, in the work dir: one rule for the
request model's files and a language's source file (Java's is named after its
public class, which may be `Solution`, `Main$1` or `Решение`).

>>> [is_plain_name(n) for n in ("solution.py", "Foo$Bar.java", "Решение.java", "data-1.txt")]
[True, True, True, True]
>>> [is_plain_name(n) for n in (".hidden", "-rf", "a/b", "a b", "solution.py\\n", "x\\u202e.py", "")]
[False, False, False, False, False, False, False]
"""

import re

__all__ = ["MAX_NAME_CHARS", "is_plain_name"]

# Word characters of any script, `$`, `.` and `-`; not hidden and not
# option-like: the first is a word character or `$`. Nothing of it means
# anything to a program we start (argv, never a shell line); format characters
# (bidirectional overrides, zero-width joiners) are not word characters.
_PLAIN = re.compile(r"[\w$][\w$.\-]*")
MAX_NAME_CHARS = 128
MAX_NAME_BYTES = 255  # the file system's NAME_MAX, in UTF-8


def is_plain_name(name: str) -> bool:
    """Whether `name` is one plain file name the work dir can hold."""
    return (_PLAIN.fullmatch(name) is not None and len(name) <= MAX_NAME_CHARS
            and len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES)
