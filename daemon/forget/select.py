"""Selectors → sessions (reference §7.2). Pure: session metadata in, targets out.

* every match is exact string equality, case-sensitive;
* a session key selects every live window recorded under it, and archives with that key;
* hook-source and participant selectors match live metadata only (archives need an id or key);
* `since` filters after resolution, so a known selector filtered out by it does not become
  "unresolved";
* what memoryd recorded of a session (`recorded`: the id and key of its checkpoint or entry
  origins, a forgotten record) completes what the source lists: an archive whose entry is gone
  gets its recorded key, and a value that names no live window or archive but a recorded id or
  key resolves as `recorded` (a session the session store deleted, history and all);
* an explicit value that resolves to nothing is still selected, literally, as a session id:
  it gets a forgotten record on apply (which does not prove the session was ever found);
* a selector that matched nothing is listed (`unmatched`), with the known values closest to it
  (`suggest_close`), so a typo is not silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from memoryd.sessions.model import ArchiveInfo, SessionInfo
from memoryd.utf16 import utf16_key

Resolution = Literal["live", "archived", "recorded", "unresolved"]


@dataclass(frozen=True, slots=True)
class SessionTarget:
    session_id: str
    session_key: str | None
    resolution: Resolution
    hook_source: str | None = None
    channel: str | None = None
    account_id: str | None = None
    chat_type: str | None = None
    created_at: int | None = None
    participants: tuple[tuple[tuple[str, Any], ...], ...] = ()  # identities as items, `id` last


@dataclass(frozen=True, slots=True)
class Selectors:
    sessions: tuple[str, ...]
    participants: tuple[str, ...]
    hook_sources: tuple[str, ...]
    since_ms: int | None = None
    entries: tuple[str, ...] = ()  # entry keys: one fact each (daemon/forget/entries.py)
    match: str | None = None  # the whole text of an entry

    @property
    def by_entry(self) -> bool:
        """A forget of single facts rather than of whole sessions."""
        return bool(self.entries) or self.match is not None


@dataclass(frozen=True, slots=True)
class ParticipantMatch:
    actor_id: str
    identities: tuple[dict[str, Any], ...]


SelectorKind = Literal["session", "participant", "hookSource", "match"]
# How many known values a selector that matched nothing is shown, and how alike they must be
# (difflib's ratio: a transposition or a changed case of a short id is about 0.8).
CLOSE_MATCHES = 3
CLOSE_MATCH_CUTOFF = 0.6


@dataclass(frozen=True, slots=True)
class UnmatchedSelector:
    """A selector value that matched no session: a session id or key nobody knows (still
    recorded as forgotten, literally), a participant or hook source of no session; or `--match`
    text that no entry has."""

    selector: SelectorKind
    value: str
    close_matches: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionSelection:
    targets: tuple[SessionTarget, ...]
    participant_matches: tuple[ParticipantMatch, ...]
    unmatched: tuple[UnmatchedSelector, ...] = ()

    @property
    def session_ids(self) -> frozenset[str]:
        return frozenset(t.session_id for t in self.targets)

    @property
    def session_keys(self) -> frozenset[str]:
        return frozenset(t.session_key for t in self.targets if t.session_key)


def _identity_items(identity: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(identity.items()))


def select_sessions(
    sessions: Iterable[SessionInfo],
    archives: Sequence[ArchiveInfo],
    selectors: Selectors,
    recorded: Sequence[tuple[str, str | None]] = (),
) -> SessionSelection:
    wanted = set(selectors.sessions)
    hooks = set(selectors.hook_sources)
    actors = set(selectors.participants)
    if not (wanted or hooks or actors):
        return SessionSelection((), ())
    since = selectors.since_ms
    resolved: set[str] = set()
    targets: dict[str, SessionTarget] = {}
    live = sorted(sessions, key=lambda s: (s.created_at or 0, utf16_key(s.session_id)))
    for s in live:
        ids = [p.actor_id for p in s.participants]
        if not (
            s.session_id in wanted
            or (s.session_key is not None and s.session_key in wanted)
            or (s.hook_source and s.hook_source in hooks)
            or any(a in actors for a in ids)
        ):
            continue
        resolved.add(s.session_id)
        if s.session_key is not None:
            resolved.add(s.session_key)
        if since is None or (s.created_at is not None and s.created_at >= since):
            targets[s.session_id] = SessionTarget(
                s.session_id,
                s.session_key,
                "live",
                s.hook_source,
                s.channel,
                s.account_id,
                s.chat_type,
                s.created_at,
                tuple(tuple(p.identity().items()) for p in s.participants),
            )
    recorded_key: dict[str, str] = {}
    for sid, key in recorded:
        if key is not None:
            recorded_key.setdefault(sid, key)
    _select_archives(archives, recorded_key, wanted, since, resolved, targets)
    listed = {s.session_id for s in live} | {a.session_id for a in archives}
    for sid, key in recorded:
        # Only what the source lists no longer: a listed session was decided above.
        if sid in listed or sid in targets or not (sid in wanted or (key is not None and key in wanted)):
            continue
        resolved.add(sid)
        if key is not None:
            resolved.add(key)
        targets[sid] = SessionTarget(sid, recorded_key.get(sid), "recorded")
    unmatched: list[UnmatchedSelector] = []
    for value in selectors.sessions:
        if value not in resolved and value not in targets:
            targets[value] = SessionTarget(value, None, "unresolved")
            unmatched.append(UnmatchedSelector("session", value))
    return SessionSelection(
        tuple(targets.values()),
        _participant_matches(targets.values(), selectors.participants),
        tuple(dict.fromkeys(unmatched + _unmatched_live(live, selectors))),
    )


def _unmatched_live(live: Sequence[SessionInfo], selectors: Selectors) -> list[UnmatchedSelector]:
    """The participant and hook-source selectors that no live session matches (`since` aside)."""
    hooks = {s.hook_source for s in live if s.hook_source}
    actors = {p.actor_id for s in live for p in s.participants}
    out = [UnmatchedSelector("participant", a) for a in selectors.participants if a not in actors]
    return out + [UnmatchedSelector("hookSource", h) for h in selectors.hook_sources if h not in hooks]


def suggest_close(
    selection: SessionSelection,
    sessions: Iterable[SessionInfo],
    archives: Iterable[ArchiveInfo],
    recorded: Iterable[tuple[str, str | None]] = (),
) -> SessionSelection:
    """The selection with each unmatched selector's closest known values: session ids and keys
    (live, archived, recorded), participants' actor ids, hook sources."""
    if not selection.unmatched:
        return selection
    from difflib import get_close_matches  # here: only a selector that matched nothing needs it

    sessions = list(sessions)
    known: dict[SelectorKind, set[str]] = {
        "session": {s.session_id for s in sessions}
        | {s.session_key for s in sessions if s.session_key}
        | {a.session_id for a in archives}
        | {a.session_key for a in archives if a.session_key}
        | {v for pair in recorded for v in pair if v},
        "participant": {p.actor_id for s in sessions for p in s.participants},
        "hookSource": {s.hook_source for s in sessions if s.hook_source},
    }
    candidates = {kind: sorted(values, key=utf16_key) for kind, values in known.items()}
    unmatched = tuple(
        replace(
            u,
            close_matches=tuple(
                get_close_matches(u.value, candidates[u.selector], CLOSE_MATCHES, CLOSE_MATCH_CUTOFF)
            ),
        )
        for u in selection.unmatched
    )
    return replace(selection, unmatched=unmatched)


def _select_archives(
    archives: Sequence[ArchiveInfo],
    recorded_key: dict[str, str],
    wanted: set[str],
    since: int | None,
    resolved: set[str],
    targets: dict[str, SessionTarget],
) -> None:
    """Add the archives an id or key selects (an archive without a key takes the recorded one)."""
    for a in archives:
        key = a.session_key if a.session_key is not None else recorded_key.get(a.session_id)
        if not (a.session_id in wanted or (key is not None and key in wanted)):
            continue
        resolved.add(a.session_id)
        if key is not None:
            resolved.add(key)
        if a.session_id in targets or (
            since is not None and a.created_at is not None and a.created_at < since
        ):
            continue
        targets[a.session_id] = SessionTarget(a.session_id, key, "archived", created_at=a.created_at)


def _participant_matches(
    targets: Iterable[SessionTarget], actors: Sequence[str]
) -> tuple[ParticipantMatch, ...]:
    identities = [dict(items) for t in targets for items in t.participants]
    out = []
    for actor in sorted(set(actors), key=utf16_key):
        seen: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
        for identity in identities:
            if identity.get("id") == actor:
                seen.setdefault(_identity_items(identity), identity)
        out.append(ParticipantMatch(actor, tuple(seen.values())))
    return tuple(out)
