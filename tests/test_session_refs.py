"""Session references in text artifacts are unambiguous for every id memoryd accepts.

Corpus lines (`[<agent>/sessions/<agent>/<id>#L<n>]`), checkpoint keys and seen-hash scopes
(`<agent>:<id>`), index paths and `Session ID: <id>` labels name a session by its id; forget
finds them by that grammar. An id the grammar cannot hold (it stops at whitespace, `]`, `#`,
`;`, `:`, and reduces a transcript-file-like name to its stem) is refused where sessions are
listed, with one line naming the store and the id, and is never ingested."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.agent_runtime import agent_runtime
from memoryd.forget.refs import references_session
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget
from memoryd.ids import session_id_problem, session_reference_problem
from memoryd.ingest.checkpoints import seen_scope, state_key
from memoryd.ingest.corpus import render_line
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.sessions.admission import CHECKPOINT_TWIN_RE
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

AGENT = "main"
# Every character class the reference grammar stops at or treats specially, and ordinary ones.
PIECES = [":", "#", " ", ";", "]", "[", "\t", "\u00a0", "\u2028", ".", "-", "_", "a", "Z", "7", "é", "数"]
PIECES += [".jsonl", ".jsonl.reset.2026-08-25T10-00-00.000Z", ".trajectory", ".checkpoint.x", "sessions"]
ids = st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join)
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _twin(session_id: str) -> bool:
    """A compaction checkpoint twin: listed, but never ingested (daemon/sessions/admission.py)."""
    return CHECKPOINT_TWIN_RE.search(f"{session_id}.jsonl") is not None


def _forms(session_id: str) -> list[str]:
    """Every text form memoryd writes that names a session."""
    path = f"sessions/{AGENT}/{session_id}"
    return [
        render_line(AGENT, path, 3, "a message"),
        state_key(AGENT, path),
        seen_scope(AGENT, session_id),
        path,
        f"{path}.jsonl",
        f"Session ID: {session_id}",
    ]


@FUZZ
@given(ids, ids)
def test_an_accepted_id_is_referenced_by_every_form_and_no_other_id_is(session_id, other):
    if session_id_problem(session_id) or session_reference_problem(session_id) or _twin(session_id):
        return  # refused at the source, or never ingested: never referenced
    for form in _forms(session_id):
        assert references_session(form, AGENT, {session_id}), form
        if other != session_id and not session_reference_problem(other):
            assert not references_session(form, AGENT, {other}), (form, other)


@FUZZ
@given(ids)
def test_an_id_the_grammar_cannot_hold_is_refused(session_id):
    """The converse: what the refusal lets through, the grammar holds (so the refusal is not
    broader than needed in the characters the reference stops at)."""
    if session_id_problem(session_id) or _twin(session_id):
        return
    held = all(references_session(f, AGENT, {session_id}) for f in _forms(session_id))
    if not held:
        assert session_reference_problem(session_id) is not None


WEIRD = ["zed:1", "zed#2", "zed 3", "zed;4", "zed]5", "zed-6.jsonl"]


async def test_sessions_with_unrepresentable_ids_are_refused_and_never_ingested(tmp_path: Path, redis):
    sessions_root = tmp_path / "sessions"
    b = SessionStoreBuilder(sessions_root, AGENT)
    for i, sid in enumerate(WEIRD):
        text = f"Remember that the pelican vault number {i} is under the bridge."
        b.add(
            f"agent:main:dm:zed-{i}",
            sid,
            [Msg("user", text), Msg("assistant", "Noted: " + text)],
            participants=[{"actorId": "zed"}],
            chatType="direct",
        )
    b.add(
        "agent:main:dm:omar",
        "sess-omar",
        [Msg("user", "Remember that the orchard rota is on Monday.")],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    settings_ = make_settings(tmp_path, sessions_root)
    async with agent_runtime(settings_, AGENT, redis=redis) as rt:
        report = await run_ingest_sweep(rt)
        workspace = rt.paths.workspace
    assert report.messages_staged == 1  # omar's message only
    assert len(report.errors) == len(WEIRD)
    for sid in WEIRD:
        [line] = [e for e in report.errors if repr(sid) in e]
        assert "sessions.json" in line and line.endswith("; skipped") and "\n" not in line
    corpus = "".join(p.read_text() for p in (workspace / "memory/.dreams/session-corpus").glob("*.txt"))
    assert "pelican" not in corpus and "orchard rota" in corpus
    # Nothing of zed's was taken in, so a forget leaves nothing behind and a dry run agrees.
    await forget(settings_, ForgetRequest(agent=AGENT, participants=["zed"]), redis=redis)
    preview = await forget(settings_, ForgetRequest(agent=AGENT, participants=["zed"], dry_run=True))
    assert preview.artifacts.session_corpus_lines == preview.artifacts.short_term_entries == 0
    assert "pelican" not in "".join(
        p.read_text() for p in (workspace / "memory/.dreams/session-corpus").glob("*.txt")
    )


@FUZZ
@given(ids)
def test_the_written_forms_of_an_id_ingested_before_the_refusal_are_still_found(session_id):
    """A store ingested before ids were refused may hold one the grammar cannot: forget still
    finds its corpus lines, seen-hash scope and checkpoint key by their whole written form."""
    if session_id_problem(session_id):
        return
    path = f"sessions/{AGENT}/{session_id}"
    for form in (
        render_line(AGENT, path, 3, "a message"),
        seen_scope(AGENT, session_id),
        state_key(AGENT, path),
    ):
        assert references_session(form, AGENT, {session_id}), form
