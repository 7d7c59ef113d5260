"""Scopes: `tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]]` (pure; no I/O).

Nesting is structural: B is under A when B starts with A + ':'.

A scope can name any id memoryd stores: ids are opaque data (an actor id from session metadata
may hold a trailing space, a tab, a newline or 300 characters), so an odd id never makes a scope
fail, and never blocks anyone's erasure. Inside an id, each character the grammar or a shell
cannot carry as is is percent-encoded, one `%XX` (upper-case hex) per UTF-8 byte:
* `%` and `:` anywhere (`%25`, `%3A`): `user:tg%3A2002` is actor `tg:2002`, and the prefix rule
  stays exact;
* control characters anywhere: C0 (tab `%09`, newline `%0A` …), DEL `%7F`, C1 (`%C2%80` …
  `%C2%9F`), and lone surrogates (`%ED%A0%80` …);
* whitespace at either end (`nadia%20` is "nadia "; `%C2%A0` a no-break space);
* the empty id is a lone `%` (an empty part is refused: it is more often an unset variable).
Everything else stands for itself (inner spaces, any other non-ASCII character), so the keys of
the ids earlier versions accepted are unchanged (but for C1 controls, which they took as is). There is one way to write each scope: another
encoding of the same id (`%41` for `A`, `%3a`) is refused with the canonical form to use.
No length cap: an id of any length the store holds is named by its encoding (operator guide §7).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from dataclasses import field as dc_field

from memoryd.constants import DAY_MS
from memoryd.errors import UsageError

LEVELS: tuple[str, ...] = ("tenant", "user", "session", "object")
# Encoded wherever they stand: the grammar's own characters, control characters (C0, DEL, C1)
# and lone surrogates (not UTF-8 text: no terminal or argv carries them). Fixed ranges, not the
# running Python's Unicode tables, so a key never changes with the interpreter.
_ENCODED_ANYWHERE = re.compile("[%:\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# Encoded at either end of an id: what `str.strip()` removes (the Unicode White_Space set).
_EDGE_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_PERCENT_RUN = re.compile("(?:%[0-9A-F]{2})+")
EMPTY_ID = "%"  # how the empty id is written


@dataclass(frozen=True, slots=True)
class Scope:
    """A parsed scope: (level, id) pairs from the tenant down; ids are decoded."""

    parts: tuple[tuple[str, str], ...]
    key: str = dc_field(init=False, compare=False, repr=False)  # the canonical string, computed once

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "key", ":".join(f"{level}:{encode_component(value)}" for level, value in self.parts)
        )

    @property
    def level(self) -> str:
        return self.parts[-1][0]

    @property
    def leaf_id(self) -> str:
        return self.parts[-1][1]

    @property
    def parent(self) -> Scope | None:
        return Scope(self.parts[:-1]) if len(self.parts) > 1 else None

    def ancestors(self) -> list[Scope]:
        """From the tenant down to the parent (excludes self)."""
        return [Scope(self.parts[:i]) for i in range(1, len(self.parts))]

    def ancestor_keys(self) -> list[str]:
        """Keys of `ancestors()`, sliced from this key (ids never hold a raw ':')."""
        pieces = self.key.split(":")
        return [":".join(pieces[: 2 * i]) for i in range(1, len(self.parts))]

    def child(self, level: str, value: str) -> Scope:
        return parse_scope(f"{self.key}:{level}:{encode_component(value)}")

    def __str__(self) -> str:
        return self.key


def _percent(chars: str) -> str:
    return "".join(f"%{b:02X}" for b in chars.encode("utf-8", "surrogatepass"))


def encode_component(value: str) -> str:
    """The scope form of any id (module doc); `decode_component` inverts it."""
    if not value:
        return EMPTY_ID
    if (
        value[0] not in _EDGE_WHITESPACE
        and value[-1] not in _EDGE_WHITESPACE
        and _ENCODED_ANYWHERE.search(value) is None
    ):
        return value  # most ids: nothing to encode
    start, end = 0, len(value)
    while start < end and value[start] in _EDGE_WHITESPACE:
        start += 1
    while end > start and value[end - 1] in _EDGE_WHITESPACE:
        end -= 1
    middle = _ENCODED_ANYWHERE.sub(lambda m: _percent(m.group()), value[start:end])
    return _percent(value[:start]) + middle + _percent(value[end:])


def decode_component(raw: str) -> str:
    """The id a scope part names; ValueError (its reason) when `raw` is not an encoding."""
    if "%" not in raw:
        return raw
    if raw == EMPTY_ID:
        return ""
    if "%" in _PERCENT_RUN.sub("", raw):
        raise ValueError("contains '%' that is not followed by two upper-case hex digits (write '%' as %25)")
    try:
        # One run at a time, so an encoded '%' followed by "3A" never decodes as ':'.
        return _PERCENT_RUN.sub(
            lambda m: bytes.fromhex(m.group().replace("%", "")).decode("utf-8", "surrogatepass"), raw
        )
    except UnicodeDecodeError:
        raise ValueError("is not percent-encoded UTF-8") from None


@functools.lru_cache(maxsize=65536)  # batches parse the same parents thousands of times
def parse_scope(text: str, *, field: str = "scope") -> Scope:
    """Parse and validate; raise UsageError naming `field` and what is wrong."""
    if not isinstance(text, str) or not text:
        raise UsageError(f"{field}: empty scope (expected tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]])")
    pieces = text.split(":")
    if len(pieces) % 2:
        raise UsageError(
            f"{field}: {text!r} is not a sequence of <level>:<id> pairs (encode ':' inside an id as %3A)"
        )
    parts: list[tuple[str, str]] = []
    for i in range(0, len(pieces), 2):
        level, raw = pieces[i], pieces[i + 1]
        expected = LEVELS[i // 2] if i // 2 < len(LEVELS) else None
        if level != expected:
            want = f"{expected!r}" if expected else "nothing (object is the deepest level)"
            raise UsageError(f"{field}: {text!r}: level {i // 2 + 1} must be {want}, got {level!r}")
        if not raw:
            raise UsageError(f"{field}: {text!r}: {level} id is empty (the empty id is written {EMPTY_ID})")
        try:
            parts.append((level, decode_component(raw)))
        except ValueError as bad:
            problem = str(bad)
            raise UsageError(f"{field}: {text!r}: {level} id {problem}") from None
    scope = Scope(tuple(parts))
    if scope.key != text:
        # Another encoding of the same ids would let one scope have two keys.
        level, raw = next(
            (lv, r) for (lv, v), r in zip(parts, pieces[1::2], strict=True) if encode_component(v) != r
        )
        problem = _not_canonical(raw)
        raise UsageError(f"{field}: {text!r}: {level} id {problem}; write the scope as {scope.key!r}")
    return scope


def _not_canonical(raw: str) -> str:
    if any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in raw):
        return "contains a control character"
    if raw[0] in _EDGE_WHITESPACE or raw[-1] in _EDGE_WHITESPACE:
        return "has surrounding spaces"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in raw):
        return "contains a lone surrogate"
    return "percent-encodes a character that is written as itself"


def is_within(scope: str, root: str) -> bool:
    """Whether `scope` is `root` or structurally under it (prefix + ':')."""
    return scope == root or scope.startswith(root + ":")


def covering(scope: str, roots: list[str] | set[str] | frozenset[str]) -> str | None:
    """The first of `roots` that `scope` is within (a hold, an expired scope), or None."""
    if not roots:
        return None
    for candidate in [*parse_scope(scope).ancestor_keys(), scope]:
        if candidate in roots:
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class TtlDecision:
    """The effective expiry of a scope and, when a request was cut down, why."""

    expires_at: int | None
    clamped: bool
    note: str | None


def decide_expiry(
    scope: str, created_at: int, retention_days: int | None, parent: str | None, parent_expires_at: int | None
) -> TtlDecision:
    """A child never outlives its parent (seed 001: child TTL <= parent TTL)."""
    wanted = None if retention_days is None else created_at + retention_days * DAY_MS
    if parent_expires_at is None:
        return TtlDecision(wanted, False, None)
    if wanted is None:
        return TtlDecision(parent_expires_at, False, None)
    if wanted <= parent_expires_at:
        return TtlDecision(wanted, False, None)
    return TtlDecision(
        parent_expires_at,
        True,
        f"retention_days {retention_days} of {scope} clamped to its parent {parent}: "
        f"expires with it at {parent_expires_at} (Unix ms)",
    )
