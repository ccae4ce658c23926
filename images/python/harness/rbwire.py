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


def encode(value):
    """A JSON-ready tree for `value`, or TypeError for anything but plain data.

    Subclasses of the builtin types (Counter, defaultdict, namedtuple, IntEnum)
    cross as their base type, read through the base type's own methods: an
    overridden `__eq__`, `__iter__` or `__str__` never runs here, and what
    arrives is an exact builtin value."""
    kind = type(value)
    if value is None or kind in (bool, float, str):
        return value
    if isinstance(value, bool):  # bool cannot be subclassed; kept for clarity of order
        return bool(value)
    if isinstance(value, int):
        number = int.__index__(value)
        return number if number.bit_length() < _JSON_INT_BITS else {"$": "int", "v": hex(number)}
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        base = next(t for t in (list, tuple, set, frozenset) if isinstance(value, t))
        items = [encode(v) for v in base.__iter__(value)]
        return items if base is list else {"$": base.__name__, "v": items}
    if isinstance(value, dict):
        return {"$": "dict", "v": [[encode(k), encode(v)] for k, v in dict.items(value)]}
    if isinstance(value, bytes):
        return {"$": "bytes", "v": base64.b64encode(bytes.__bytes__(value) if kind is not bytes else value).decode()}
    if isinstance(value, complex):
        number = complex.__complex__(value) if kind is not complex else value
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
