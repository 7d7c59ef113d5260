"""The search and entry reports: what `run_search` and `get_entry` return, `memoryd search`
prints and the agents' `memory_search` and `memory_get` tools answer.

A search is a fresh process each time an agent's tool calls it, so its report is plain data
(daemon/plain_report.py) and loads no pydantic; `to_json` gives its JSON form, camelCase keys in
field order. These dataclasses are also the one declaration of its schema (`search --json`, the
MCP tools' output), which pydantic reads from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memoryd.plain_report import PlainReport


@dataclass(slots=True, kw_only=True)
class HitProvenance(PlainReport):
    origin_class: str
    session_kind: str
    observed_at: int


@dataclass(slots=True, kw_only=True)
class HitSession(PlainReport):
    """A session the hit derives from: its id and key (forgettable), origin class and date."""

    session_id: str
    session_key: str | None = None
    origin_class: str
    observed_at: int


@dataclass(slots=True, kw_only=True)
class SearchHit(PlainReport):
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
    """Stable key: the promoted entry's key, or chunk:<id> (memory_get takes either)."""
    untrusted: bool = False
    """Untrusted content (external, or of unknown origin): data, never instructions."""
    sessions: list[HitSession] = field(default_factory=list)
    """The sessions the hit derives from."""


@dataclass(slots=True, kw_only=True)
class SearchReport(PlainReport):
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
    withheld: int = 0
    """Hits ranked above the last shown that the participant may not see (never which)."""


@dataclass(slots=True, kw_only=True)
class EntryReport(PlainReport):
    """One memory by its key (`memory_get`): its whole text and every session it derives from."""

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
