"""Seen-message hashes (reference §4.5): per scope `<agent>:<sessionId>`, hashes of messages
already staged, those of the newest MAX_TRACKED_MESSAGES_PER_SESSION lines kept, so a rewritten
transcript is not re-staged. Each is the `seen` of a staged line of the keyed lineage
(store/lines.py); a scope is the agent's, so its session id is what follows the first colon (an
agent id has none).

Each function runs inside the caller's transaction (`Store.read` / `Store.write`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memoryd.constants import MAX_TRACKED_MESSAGES_PER_SESSION
from memoryd.store.engine import Connection
from memoryd.store.lines import Line, add_lines, forget_seen, seen_of_sessions, sessions_with_seen


def _session(scope: str) -> str:
    return scope.split(":", 1)[1]


def _scopes_by_session(scopes: Sequence[str]) -> dict[str, str]:
    return {_session(scope): scope for scope in scopes}


def load_seen(conn: Connection, scopes: Sequence[str]) -> dict[str, set[str]]:
    """Seen hashes of the given scopes; a scope with none is left out (a first sweep reads tens
    of thousands of sessions, every one without a hash)."""
    out: dict[str, set[str]] = {}
    of = _scopes_by_session(scopes)
    for sid, digest in seen_of_sessions(conn, list(of)):
        out.setdefault(of[sid], set()).add(digest)
    return out


def seen_among(conn: Connection, pairs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (scope, hash) pairs are seen already: lines another sweep staged since this one read
    them. A session with no hash at all (every session of a first sweep) costs one lookup."""
    scopes = list(dict.fromkeys(scope for scope, _ in pairs))
    seen = load_seen(conn, existing_scopes(conn, scopes))
    return {(scope, digest) for scope, digest in pairs if digest in seen.get(scope, ())}


def add_seen(
    conn: Connection, new_hashes: Mapping[str, Sequence[str]], keep: int = MAX_TRACKED_MESSAGES_PER_SESSION
) -> None:
    """Record newly staged hashes per scope (in staging order), each as a line of its own with no
    origin, and keep only the newest `keep`."""
    lines = [
        Line(_session(scope), None, None, None, None, digest)
        for scope, hashes in new_hashes.items()
        for digest in hashes
    ]
    add_lines(conn, lines, keep)


def existing_scopes(conn: Connection, scopes: Sequence[str]) -> list[str]:
    """Which of `scopes` have any seen hash."""
    of = _scopes_by_session(scopes)
    found = sessions_with_seen(conn, list(of))
    return [scope for sid, scope in of.items() if sid in found]


def delete_scopes(conn: Connection, scopes: Sequence[str]) -> int:
    """Drop the seen hashes of these scopes (their lines' origins stay until the origin purge)."""
    return forget_seen(conn, list(_scopes_by_session(scopes)))
