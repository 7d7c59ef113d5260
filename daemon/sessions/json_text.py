"""JSON as the reference writes it, lone surrogates included.

Node's `JSON.stringify` writes a string cut mid-pair as a `\\udXXX` escape that no low (or
high) surrogate completes. orjson refuses such a document; the reference reads it and writes
the string to UTF-8 files and SQLite, where the lone surrogate becomes U+FFFD. So does this
reader: a document orjson refuses is retried once with each lone surrogate escape replaced
by `\\ufffd` (one UTF-16 code unit either way, so lengths and limits do not move).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# An escape not itself escaped (an even run of backslashes before it): a high surrogate with
# its low one (kept), a lone high one, or a lone low one.
_SURROGATE_ESCAPE = re.compile(
    rb"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    rb"|(?<!\\)((?:\\\\)*)\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_REPLACEMENT = rb"\ufffd"


def _fix(m: re.Match[bytes]) -> bytes:
    if m.group(2) is not None:
        if m.group(3) is not None:
            return m.group(0)  # a proper pair
        return m.group(1) + _REPLACEMENT
    return (m.group(4) or b"") + _REPLACEMENT


def replace_lone_surrogate_escapes(raw: bytes) -> bytes:
    return _SURROGATE_ESCAPE.sub(_fix, raw)


def loads(raw: bytes) -> Any:
    """orjson.loads, reading lone surrogate escapes as U+FFFD; JSONDecodeError otherwise."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        if b"\\u" not in raw and b"\\U" not in raw:
            raise
        fixed = replace_lone_surrogate_escapes(raw)
        if fixed == raw:
            raise
        return orjson.loads(fixed)
