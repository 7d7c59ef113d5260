"""The keyed lineage (daemon/store/lines.py) read back as the rows it stands for, in plain SQL
for tests: every entry origin (a claim's first line in each session, and memory_entry_origins)
and every seen hash with its scope."""

from __future__ import annotations


def origins_sql(agent: str = "main") -> str:
    """A subquery of (entry_key, agent_id, session_id, session_key, origin_class, observed_at)."""
    return (
        f"SELECT printf('memory:claim:%012x', l.claim) AS entry_key, '{agent}' AS agent_id, s.session_id, "
        "s.session_key, l.origin_class, l.observed_at FROM ingest_lines l JOIN ingest_sessions s "
        "ON s.session_no = l.session_no WHERE l.claim IS NOT NULL AND l.line_no = (SELECT min(l2.line_no) "
        "FROM ingest_lines l2 JOIN ingest_sessions s2 ON s2.session_no = l2.session_no "
        "WHERE s2.session_id = s.session_id AND l2.claim = l.claim) "
        "UNION ALL SELECT entry_key, agent_id, session_id, session_key, origin_class, observed_at "
        "FROM memory_entry_origins"
    )


def seen_sql(agent: str = "main") -> str:
    """A subquery of (scope, hash, seq)."""
    return (
        f"SELECT '{agent}:' || s.session_id AS scope, l.seen AS hash, l.line_no AS seq FROM ingest_lines l "
        "JOIN ingest_sessions s ON s.session_no = l.session_no WHERE l.seen IS NOT NULL"
    )


ORIGINS = f"({origins_sql()})"
SEEN = f"({seen_sql()})"
