"""The forget report (reference §7.8) as plain data, and its human rendering: built from a plan
without pydantic, so a dry run from the CLI needs none. `memoryd.forget.report` declares the same
report as a model (the job's result, the JSON Schema) and validates this data into it; the keys
and their order here are the JSON emission order.

Lists are sorted in UTF-16 code-unit order (JavaScript's default `toSorted()`); the fields
the reference sorts with `localeCompare` (sessionResolutions by sessionId, curatedWrites by
relativePath) use `locale_key`, the root locale's order computed here, so output does not
depend on the host's locale.
The report describes the plan and is computed before any write; a purge returns it only once
the plan is applied. `counts` repeats, as numbers, what the lists hold: a job's stored result
empties the lists (they name sessions, people and content hashes) and keeps the counts, so a
caller can tell "matched nothing" from "matched sessions with no memory".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from memoryd.forget.plan import ForgetPlan
from memoryd.utf16 import locale_key, utf16_key


def _sorted(values: Any) -> list[str]:
    return sorted(set(values), key=utf16_key)


def _resolution(session_id: str, session_key: str | None, source: str) -> dict[str, Any]:
    out: dict[str, Any] = {"sessionId": session_id}
    if session_key is not None:  # the model leaves an unknown key out
        out["sessionKey"] = session_key
    out["source"] = source
    return out


def report_data(plan: ForgetPlan, *, dry_run: bool) -> dict[str, Any]:
    """The report of `plan`, as the JSON document `forget --json` prints."""
    targets = plan.selection.targets
    idx = plan.index
    data: dict[str, Any] = {
        "agentId": plan.agent_id,
        "dryRun": dry_run,
        "sessionIds": _sorted(t.session_id for t in targets),
        "participantMatches": [
            {"actorId": m.actor_id, "identities": list(m.identities)}
            for m in plan.selection.participant_matches
        ],
        "sessionResolutions": [
            _resolution(t.session_id, t.session_key, t.resolution)
            for t in sorted(targets, key=lambda t: locale_key(t.session_id))
        ],
        "entryKeys": _sorted(plan.lineage.entry_keys),
        "mixedLineageEntryKeys": _sorted(plan.lineage.mixed_entry_keys),
        "untargetableEntryKeys": _sorted(plan.untargetable_keys),
        "curatedWrites": [
            {"relativePath": w.relative_path, "observedAt": w.observed_at}
            for w in sorted(plan.curated_writes, key=lambda w: locale_key(w.relative_path))
        ],
        "artifacts": {
            "memoryFiles": len(plan.memory_rewrites),
            "memoryEntries": plan.memory_entries,
            "memoryLines": plan.memory_lines,
            "sessionCorpusFiles": len(plan.corpus_rewrites),
            "sessionCorpusLines": plan.corpus_lines,
            "indexChunks": len(idx.chunk_ids),
            "indexSources": len(idx.source_ids),
            "ftsRows": idx.fts_rows,
            "vectorRows": idx.vector_rows,
            "embeddingCacheRows": idx.embedding_cache_rows,
            "shortTermEntries": len(plan.short_term_keys),
            "seenHashScopes": len(plan.seen_scopes),
            "backups": len(plan.backup_rewrites),
            "originRows": plan.lineage.origin_rows,
        },
        "refusals": list(plan.refusals),
        "counts": {
            "sessionsMatched": len(targets),
            # Written in the purge's first transaction; a report is returned only once it is complete.
            "sessionsRecordedForgotten": 0 if dry_run else len(plan.session_ids),
            "entriesRemoved": len(plan.lineage.entry_keys),
            "mixedLineageEntriesRemoved": len(plan.lineage.mixed_entry_keys),
            "untargetableEntries": len(plan.untargetable_keys),
            "curatedWritesRetained": len(plan.curated_writes),
            "participantsMatched": len(plan.selection.participant_matches),
            "refusals": len(plan.refusals),
        },
    }
    unmatched = [
        {"selector": u.selector, "value": u.value, "closeMatches": list(u.close_matches)}
        for u in plan.selection.unmatched
    ]
    if plan.entries.unmatched_match is not None:
        unmatched.append({"selector": "match", "value": plan.entries.unmatched_match, "closeMatches": []})
    if unmatched:  # beyond the reference, and only when there is one
        data["unmatchedSelectors"] = unmatched
    if plan.entries.requested:  # forget --entry / --match: the facts chosen, with their origins
        data["counts"]["suppressedClaims"] = len(plan.suppressions)
        data["forgottenEntries"] = [
            {
                "entryKey": e.entry_key,
                "text": e.text,
                "origins": [_origin(o.session_id, o.session_key) for o in e.origins],
            }
            for e in plan.entries.entries
        ]
    return data


def _origin(session_id: str, session_key: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"sessionId": session_id}
    if session_key is not None:  # the model leaves an unknown key out
        out["sessionKey"] = session_key
    return out


def _unmatched_line(agent: str, u: Mapping[str, Any], dry_run: bool) -> str:
    what = {"session": "session id or key", "participant": "participant", "hookSource": "hook source"}
    if u["selector"] == "match":
        return (
            f"No staged or promoted entry of agent {agent} has the text {u['value']!r}; it selects nothing "
            "(the whole text of an entry, as `memoryd search` shows it)."
        )
    if u["selector"] == "session":
        done = "would be recorded" if dry_run else "is recorded"
        line = (
            f"No session {u['value']!r} is known to agent {agent} (no live session, archive or record "
            f"of it); it {done} as forgotten as written."
        )
    else:
        line = (
            f"No session of agent {agent} has the {what[u['selector']]} {u['value']!r}; it selects nothing."
        )
    if u["closeMatches"]:
        line += " Did you mean: " + ", ".join(repr(m) for m in u["closeMatches"]) + "?"
    return line


def render_human(report: Mapping[str, Any]) -> str:
    """A readable summary of the report's JSON form (the reference's human output, §7.8)."""
    a = report["artifacts"]
    c = report["counts"]  # a stored result (Redis) keeps these, not the lists they count
    title = "Memory Deletion Preview" if report["dryRun"] else f"Memory Deletion ({report['agentId']})"
    lines = [
        title,
        f"Agent: {report['agentId']}",
        f"Source sessions: {c['sessionsMatched']}",
        "Source transcripts retained: yes (forget never deletes transcripts or archives)",
        f"Deleted entries: {c['entriesRemoved']}",
        f"Mixed-lineage entries deleted whole: {c['mixedLineageEntriesRemoved']}",
        f"Entries without targetable provenance: {c['untargetableEntries']}",
        f"Curated writes retained: {c['curatedWritesRetained']}",
        f"Memory artifacts: {a['memoryFiles']} files, {a['memoryEntries']} entries, {a['memoryLines']} quoted lines",
        f"Session corpus: {a['sessionCorpusFiles']} files, {a['sessionCorpusLines']} lines",
        f"Index artifacts: {a['indexChunks']} chunks, {a['indexSources']} sources, {a['ftsRows']} full-text rows, "
        f"{a['vectorRows']} vector rows, {a['embeddingCacheRows']} cached embeddings",
        f"Plugin state: {a['shortTermEntries']} short-term entries, {a['seenHashScopes']} seen-hash scopes, "
        f"{a['backups']} backups",
        f"Origin rows: {a['originRows']}",
    ]
    if report["sessionIds"]:
        lines.append("Session IDs: " + ", ".join(report["sessionIds"]))
    lines += [f"Session resolution: {r['sessionId']} ({r['source']})" for r in report["sessionResolutions"]]
    for e in report.get("forgottenEntries", ()):
        origins = ", ".join(
            o["sessionId"] + (f" ({o['sessionKey']})" if "sessionKey" in o else "") for o in e["origins"]
        )
        lines.append(f"Entry: {e['entryKey']}: {e['text']!r}; origins: {origins or 'none recorded'}")
    if "suppressedClaims" in c:
        done = "would be suppressed" if report["dryRun"] else "suppressed"
        lines.append(
            f"Claims {done} from their sessions: {c['suppressedClaims']} "
            "(never staged or promoted again from those sessions; their other memory stays)"
        )
    for m in report["participantMatches"]:
        found = orjson.dumps(m["identities"]).decode() if m["identities"] else "no live match"
        lines.append(
            f"Raw participant selector: {m['actorId']}: {found}. "
            "Matches select whole sessions across identity namespaces."
        )
    lines += [f"Mixed-lineage entry deleted whole: {k}" for k in report["mixedLineageEntryKeys"]]
    lines += [f"Entry without targetable provenance: {k}" for k in report["untargetableEntryKeys"]]
    for w in report["curatedWrites"]:
        when = datetime.fromtimestamp(w["observedAt"] / 1000, UTC).isoformat().replace("+00:00", "Z")
        lines.append(f"Curated write retained: {w['relativePath']} ({when})")
    lines += [f"Refused: {r}" for r in report["refusals"]]
    lines += [
        _unmatched_line(report["agentId"], u, report["dryRun"]) for u in report.get("unmatchedSelectors", ())
    ]
    if report["dryRun"]:
        lines.append("Dry run: no memory files, index rows, or plugin state were changed.")
    return "\n".join(lines)
