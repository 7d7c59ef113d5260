"""The forget report for a reader (the reference's human output, §7.8).

It reads the counts for what the lists hold: a job's stored result (Redis) empties the lists and
keeps the counts, and `memoryd enqueue forget --wait` prints that.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from memoryd.forget.report import EntryOriginModel, ForgetReport, UnmatchedSelectorModel

_WHAT = {"session": "session id or key", "participant": "participant", "hookSource": "hook source"}


def _unmatched_line(agent: str, u: UnmatchedSelectorModel, dry_run: bool) -> str:
    if u.selector == "match":
        return (
            f"No staged or promoted entry of agent {agent} has the text {u.value!r}; it selects nothing "
            "(the whole text of an entry, as `memoryd search` shows it)."
        )
    if u.selector == "session":
        done = "would be recorded" if dry_run else "is recorded"
        line = (
            f"No session {u.value!r} is known to agent {agent} (no live session, archive or record "
            f"of it); it {done} as forgotten as written."
        )
    else:
        line = f"No session of agent {agent} has the {_WHAT[u.selector]} {u.value!r}; it selects nothing."
    if u.close_matches:
        line += " Did you mean: " + ", ".join(repr(m) for m in u.close_matches) + "?"
    return line


def _origin(o: EntryOriginModel) -> str:
    return o.session_id if o.session_key is None else f"{o.session_id} ({o.session_key})"


def render_human(report: ForgetReport) -> str:
    """A readable summary of the report."""
    a, c = report.artifacts, report.counts
    title = "Memory Deletion Preview" if report.dry_run else f"Memory Deletion ({report.agent_id})"
    lines = [
        title,
        f"Agent: {report.agent_id}",
        f"Source sessions: {c.sessions_matched}",
        "Source transcripts retained: yes (forget never deletes transcripts or archives)",
        f"Deleted entries: {c.entries_removed}",
        f"Mixed-lineage entries deleted whole: {c.mixed_lineage_entries_removed}",
        f"Entries without targetable provenance: {c.untargetable_entries}",
        f"Curated writes retained: {c.curated_writes_retained}",
        f"Memory artifacts: {a.memory_files} files, {a.memory_entries} entries, {a.memory_lines} quoted lines",
        f"Session corpus: {a.session_corpus_files} files, {a.session_corpus_lines} lines",
        f"Index artifacts: {a.index_chunks} chunks, {a.index_sources} sources, {a.fts_rows} full-text rows, "
        f"{a.vector_rows} vector rows, {a.embedding_cache_rows} cached embeddings",
        f"Plugin state: {a.short_term_entries} short-term entries, {a.seen_hash_scopes} seen-hash scopes, "
        f"{a.backups} backups",
        f"Origin rows: {a.origin_rows}",
    ]
    if report.session_ids:
        lines.append("Session IDs: " + ", ".join(report.session_ids))
    lines += [f"Session resolution: {r.session_id} ({r.source})" for r in report.session_resolutions]
    for e in report.forgotten_entries or ():
        origins = ", ".join(_origin(o) for o in e.origins)
        lines.append(f"Entry: {e.entry_key}: {e.text!r}; origins: {origins or 'none recorded'}")
    if c.suppressed_claims is not None:
        done = "would be suppressed" if report.dry_run else "suppressed"
        lines.append(
            f"Claims {done} from their sessions: {c.suppressed_claims} "
            "(never staged or promoted again from those sessions; their other memory stays)"
        )
    for m in report.participant_matches:
        found = orjson.dumps(m.identities).decode() if m.identities else "no live match"
        lines.append(
            f"Raw participant selector: {m.actor_id}: {found}. "
            "Matches select whole sessions across identity namespaces."
        )
    lines += [f"Mixed-lineage entry deleted whole: {k}" for k in report.mixed_lineage_entry_keys]
    lines += [f"Entry without targetable provenance: {k}" for k in report.untargetable_entry_keys]
    for w in report.curated_writes:
        when = datetime.fromtimestamp(w.observed_at / 1000, UTC).isoformat().replace("+00:00", "Z")
        lines.append(f"Curated write retained: {w.relative_path} ({when})")
    lines += [f"Refused: {r}" for r in report.refusals]
    lines += [_unmatched_line(report.agent_id, u, report.dry_run) for u in report.unmatched_selectors]
    if report.dry_run:
        lines.append("Dry run: no memory files, index rows, or plugin state were changed.")
    return "\n".join(lines)
