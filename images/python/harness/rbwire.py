"""Plain data across the boundary between the test process and the
completion's worker process: length-prefixed JSON frames, and a strict
encoding of Python values.

Only plain data crosses: values of the builtin types, subclasses reduced to
their base type (an int subclass whose `__eq__` is always true arrives as a
plain int), so whatever the completion returns, the test process compares
plain data that it decoded itself.
"""

import base64
import json
import os
import struct

MAX_FRAME_BYTES = 64 << 20
# JSON writes integers in decimal, which Python refuses past 4300 digits: larger
# ones cross in hexadecimal, which has no such limit.
_JSON_INT_BITS = 4000
_HEADER = struct.Struct(">I")


class WireError(Exception):
    """A frame or value that does not follow the protocol."""


class Budget:
    """The bytes a frame has left, spent while a value is encoded, so that a
    value sure to be over the frame limit fails as soon as that is sure, not
    after its tree is built whole (which can take longer than the run's
    deadline, or more memory than the worker has).

    Each part is charged a lower bound of its JSON (a string its length plus
    quotes, a container its brackets and a separator an item, before its items
    are read): the exact measure is still write_frame's. A container met again
    (`[row] * 100_000`) is charged again but encoded once: its repeats cost
    the budget, not the work or the memory of copies."""

    TAG_BYTES = 16  # {"$":"int","v":} around a tagged body

    def __init__(self, limit=MAX_FRAME_BYTES):
        self.limit = limit
        self.left = limit
        self._made = {}  # key -> (the container, kept alive so its id is not reused; its tree; bytes charged)

    def spend(self, nbytes):
        self.left -= nbytes
        if self.left < 0:
            raise WireError(f"a value over the frame limit of {self.limit} bytes cannot cross the sandbox boundary")

    def items(self, count, each=1, tagged=False):
        """A container of `count` items, before they are read: its brackets
        and `each` bytes an item (a separator; a dict's pair also its
        brackets), one less in all; and room left for a byte of each item."""
        self.spend(2 + max(count * each - 1, 0) + (self.TAG_BYTES if tagged else 0))
        if count > self.left:
            self.spend(count)  # raises

    def again(self, key):
        """The tree kept for `key` (charged again), or None the first time it is met."""
        made = self._made.get(key)
        if made is None:
            return None
        self.spend(made[2])
        return made[1]

    def keep(self, key, container, tree, left_before):
        """`container`'s tree, made while the budget went down from `left_before`."""
        self._made[key] = (container, tree, left_before - self.left)
        return tree


def int_bytes(number):
    """A lower bound of an int's decimal digits: a bit is at least 0.3 of a digit."""
    return max(1, number.bit_length() * 3 // 10)


def encode(value, budget=None):
    """A JSON-ready tree for `value`, or TypeError for anything but plain data,
    WireError once it is sure to be over the frame limit (Budget).

    Subclasses of the builtin types (Counter, defaultdict, namedtuple, IntEnum)
    cross as their base type, read through the base type's own methods: an
    overridden `__eq__`, `__iter__` or `__str__` never runs here, and what
    arrives is an exact builtin value."""
    if budget is None:
        budget = Budget()
    kind = type(value)
    if value is None or kind is bool:
        budget.spend(4)
        return value
    if kind is float:
        budget.spend(3)
        return value
    if kind is str:
        budget.spend(len(value) + 2)
        return value
    if isinstance(value, int):
        number = int.__index__(value)
        if number.bit_length() < _JSON_INT_BITS:
            budget.spend(int_bytes(number))
            return number
        text = hex(number)
        budget.spend(len(text) + 2 + Budget.TAG_BYTES)
        return {"$": "int", "v": text}
    if isinstance(value, float):
        budget.spend(3)
        return float.__float__(value)
    if isinstance(value, str):
        text = str.__str__(value)
        budget.spend(len(text) + 2)
        return text
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        made = budget.again(id(value))
        if made is not None:
            return made
        left_before = budget.left
        if isinstance(value, dict):
            budget.items(dict.__len__(value), each=4, tagged=True)  # [k,v] and a separator
            tree = {"$": "dict", "v": [[encode(k, budget), encode(v, budget)] for k, v in dict.items(value)]}
        else:
            base = next(t for t in (list, tuple, set, frozenset) if isinstance(value, t))
            budget.items(base.__len__(value), tagged=base is not list)
            items = [encode(v, budget) for v in base.__iter__(value)]
            tree = items if base is list else {"$": base.__name__, "v": items}
        return budget.keep(id(value), value, tree, left_before)
    if isinstance(value, bytes):
        data = bytes.__bytes__(value) if kind is not bytes else value
        budget.spend(4 * ((len(data) + 2) // 3) + 2 + Budget.TAG_BYTES)
        return {"$": "bytes", "v": base64.b64encode(data).decode()}
    if isinstance(value, complex):
        number = complex.__complex__(value) if kind is not complex else value
        budget.spend(9 + Budget.TAG_BYTES)
        return {"$": "complex", "v": [number.real, number.imag]}
    raise TypeError(f"a {kind.__name__} cannot cross the sandbox boundary (only plain data: "
                    "None, bool, int, float, str, bytes, complex, list, tuple, dict, set and their subclasses)")


def decode(tree):
    """The value `encode` described; every tag is checked."""
    kind = type(tree)
    if tree is None or kind in (bool, int, float, str):
        return tree
    if kind is list:
        return [decode(v) for v in tree]
    if kind is not dict or set(tree) != {"$", "v"}:
        raise WireError(f"not an encoded value: {str(tree)[:80]}")
    tag, body = tree["$"], tree["v"]
    if tag == "tuple":
        return tuple(decode(v) for v in body)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in body}
    if tag == "set":
        return {decode(v) for v in body}
    if tag == "frozenset":
        return frozenset(decode(v) for v in body)
    if tag == "int":
        return int(body, 16)
    if tag == "bytes":
        return base64.b64decode(body)
    if tag == "complex":
        return complex(float(body[0]), float(body[1]))
    raise WireError(f"unknown tag {tag!r}")


def write_frame(fd, message):
    """One frame, whole: WireError (nothing written) for a body over the limit."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if len(body) > MAX_FRAME_BYTES:
        raise WireError(f"frame of {len(body)} bytes is over the limit of {MAX_FRAME_BYTES}")
    data = _HEADER.pack(len(body)) + body
    while data:
        data = data[os.write(fd, data):]


def read_exactly(fd, size, wait):
    """`size` bytes from fd; `wait(fd)` blocks until readable or raises."""
    chunks, missing = [], size
    while missing:
        wait(fd)
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def read_frame(fd, wait=lambda fd: None):
    (size,) = _HEADER.unpack(read_exactly(fd, _HEADER.size, wait))
    if size > MAX_FRAME_BYTES:
        raise WireError(f"frame of {size} bytes is over the limit")
    try:
        return json.loads(read_exactly(fd, size, wait))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise WireError(f"frame is not JSON: {exc}") from None
