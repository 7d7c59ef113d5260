"""Scopes: `tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]]` (pure; no I/O).

Nesting is structural: B is under A when B starts with A + ':'. A component that itself
contains ':' or '%' is percent-encoded (`%3A`, `%25`), so `user:tg%3A2002` is actor `tg:2002`
and the prefix rule stays exact.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from dataclasses import field as dc_field

from daemon.constants import DAY_MS, SCOPE_COMPONENT_MAX_CHARS
from daemon.errors import UsageError

LEVELS: tuple[str, ...] = ("tenant", "user", "session", "object")
_ESCAPE_RE = re.compile(r"%(3A|25)")


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


def encode_component(value: str) -> str:
    return value.replace("%", "%25").replace(":", "%3A")


def decode_component(value: str) -> str:
    # One pass, so an encoded '%' followed by "3A" never decodes as ':'.
    return _ESCAPE_RE.sub(lambda m: ":" if m.group(1) == "3A" else "%", value)


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
        value = decode_component(raw)
        problem = _component_problem(raw, value)
        if problem:
            raise UsageError(f"{field}: {text!r}: {level} id {problem}")
        parts.append((level, value))
    scope = Scope(tuple(parts))
    if scope.key != text:
        # Non-canonical encodings (e.g. '%3a') would let one scope have two keys.
        raise UsageError(f"{field}: {text!r} is not canonical; write it as {scope.key!r}")
    return scope


def _component_problem(raw: str, value: str) -> str | None:
    if not raw:
        return "is empty"
    if len(value) > SCOPE_COMPONENT_MAX_CHARS:
        return f"is longer than {SCOPE_COMPONENT_MAX_CHARS} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "contains a control character"
    if value != value.strip():
        return "has surrounding spaces"
    if "%" in raw.replace("%3A", "").replace("%25", ""):
        return "contains '%' that is not %3A or %25"
    return None


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
