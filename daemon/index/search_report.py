"""The search report as plain data: what `run_search` returns and `memoryd search` prints.

A search is a fresh process each time an agent's tool calls it, so its report does not load
pydantic. `memoryd.index.report.SearchReport` is the same report as a model (the `search --json`
schema); `to_json` gives the model's JSON form, camelCase keys in its field order
(tests/test_search.py holds the two together, `EntryReport` too).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _json(value: Any) -> Any:
    if isinstance(value, _Plain):
        return value.to_json()
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


# (field name, JSON key) per report class, worked out once: an agent's search is converted per
# call, and `fields()` plus the camel-casing of every key cost more than the conversion itself.
_KEYS: dict[type, tuple[tuple[str, str], ...]] = {}


class _Plain:
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON form of the matching model in memoryd.index.report (by alias, field order)."""
        keys = _KEYS.get(type(self))
        if keys is None:
            keys = _KEYS[type(self)] = tuple((f.name, _camel(f.name)) for f in fields(self))  # type: ignore[arg-type]
        return {key: _json(getattr(self, name)) for name, key in keys}


@dataclass(slots=True, kw_only=True)
class HitProvenance(_Plain):
    origin_class: str
    session_kind: str
    observed_at: int


@dataclass(slots=True, kw_only=True)
class HitSession(_Plain):
    session_id: str
    session_key: str | None = None
    origin_class: str
    observed_at: int


@dataclass(slots=True, kw_only=True)
class SearchHit(_Plain):
    path: str
    source: str
    start_line: int
    end_line: int
    score: float
    text_score: float | None = None
    vector_score: float | None = None
    snippet: str
    session_id: str | None = None
    provenance: HitProvenance | None = None
    key: str = ""
    untrusted: bool = False
    sessions: list[HitSession] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class SearchReport(_Plain):
    agent_id: str
    query: str
    mode: str  # "fts" | "hybrid"
    stale: bool = False
    warning: str | None = None
    action: str | None = None
    candidates_capped: bool = False  # a very common query ranked only the newest matches
    results: list[SearchHit] = field(default_factory=list)
    scope: str = "agent"  # "agent" | "participant" (recall.scope)
    participant: str | None = None
    withheld: int = 0  # hits ranked above the last shown that the participant may not see


@dataclass(slots=True, kw_only=True)
class EntryReport(_Plain):
    agent_id: str
    key: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    untrusted: bool
    provenance: HitProvenance | None = None
    sessions: list[HitSession] = field(default_factory=list)
