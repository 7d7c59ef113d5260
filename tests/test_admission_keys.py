"""Rules on the session key that every reading path applies: incognito sessions never feed
memory whatever the policy says, cron parents stay out as their runs do, and the policy may keep
sessions out by key pattern."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.dreaming.backfill import BackfillRequest, run_backfill
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.sessions.admission import (
    REASON_CRON,
    REASON_INCOGNITO,
    AdmissionPolicy,
    admission_reason,
    exclusion_reason,
    key_reason,
    policy_of,
)
from memoryd.sessions.model import SessionInfo
from memoryd.settings import ExcludeSessions
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings
from tests.dream_kit import runtime


def session(key: str, *, kind: str = "interactive", chat: str | None = None) -> SessionInfo:
    return SessionInfo("main", "s1", key, kind, chat_type=chat, locator="/x/s1.jsonl")  # type: ignore[arg-type]


INCOGNITO = "agent:main:dashboard:incognito-3f2b9c1e-7a4d-4e0b-9c55-2d1f8e6a0b77"
EVERY_POLICY = AdmissionPolicy(
    frozenset({"gmail"}), frozenset({"discord"}), frozenset({"group"}), ("agent:main:telegram:*",)
)

policies = st.sampled_from([None, AdmissionPolicy(), EVERY_POLICY])


@given(
    uuid=st.uuids().map(str),
    agent=st.from_regex(r"\A[a-z][a-z0-9_-]{0,11}\Z"),
    policy=policies,
    kind=st.sampled_from(["interactive", "subagent", "unknown"]),
)
def test_an_incognito_session_is_never_admitted_whatever_the_policy(uuid, agent, policy, kind) -> None:
    s = session(key=f"agent:{agent}:dashboard:incognito-{uuid}", kind=kind)
    assert admission_reason(s, policy, ()) == REASON_INCOGNITO
    assert exclusion_reason(s, policy, ()) == REASON_INCOGNITO  # what the transcript index asks
    assert key_reason(s.session_key, policy) == REASON_INCOGNITO  # what an archive is asked
    assert admission_reason(s, policy, {"s1"}) == "forgotten"  # forgotten still comes first


@given(key=st.sampled_from(["agent:main:main", "agent:main:dashboard:main", "agent:main:incognito"]))
def test_keys_that_only_mention_incognito_are_admitted(key) -> None:
    assert admission_reason(session(key=key), None, ()) is None


def test_a_cron_parent_is_kept_out_even_when_recorded_as_interactive() -> None:
    assert admission_reason(session(key="cron:nightly-digest"), None, ()) == REASON_CRON
    assert admission_reason(session(key="agent:main:cron:nightly:run:7"), None, ()) == REASON_CRON
    assert admission_reason(session(key="cron:nightly-digest", kind="cron"), None, ()) == "sessionKind:cron"
    assert admission_reason(session(key="agent:main:cronjobs-notes"), None, ()) is None


def test_the_policy_keeps_sessions_out_by_key_pattern() -> None:
    policy = AdmissionPolicy.from_settings(
        ExcludeSessions(session_keys=[" agent:*:telegram:* ", "", "hook:??"])
    )
    assert policy is not None and policy.session_keys == ("agent:*:telegram:*", "hook:??")
    assert exclusion_reason(session(key="agent:main:telegram:direct:nora"), policy, ()) == (
        "sessionKey:agent:*:telegram:*"
    )
    assert exclusion_reason(session(key="hook:ab"), policy, ()) == "sessionKey:hook:??"
    assert exclusion_reason(session(key="hook:abc"), policy, ()) is None
    assert exclusion_reason(session(key="AGENT:main:telegram:x"), policy, ()) is None  # case-sensitive
    # The reference's own rules are checked first, and name themselves.
    assert exclusion_reason(session(key="agent:main:telegram:g", chat="group"), EVERY_POLICY, ()) == (
        "chatType:group"
    )


async def test_no_path_reads_incognito_cron_parent_or_pattern_excluded_sessions(
    tmp_path, sessions_root, unique, redis
):
    b = SessionStoreBuilder(sessions_root, "main")
    kept_out = {
        INCOGNITO: "s-incognito",
        "cron:nightly-digest": "s-cron-parent",
        "agent:main:telegram:direct:omar": "s-telegram",
    }
    for key, sid in kept_out.items():
        b.add(
            key,
            sid,
            [Msg("user", f"Remember the private harbour detail of {sid} forever.")],
            chatType="direct",
        )
    b.add(
        "agent:main:main",
        "s-main",
        [Msg("user", "Remember the ferry leaves at nine sharp.")],
        chatType="direct",
    )
    # An incognito session reset earlier: its entry remains, its transcript is an archive now.
    b.add("agent:main:dashboard:incognito-0b1c", "s-gone", write_transcript=False)
    b.archive("s-gone", "deleted", messages=[Msg("user", "Remember the archived incognito harbour detail.")])
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
        memory_policy={"exclude_sessions": {"session_keys": ["agent:*:telegram:*"]}},
        index={"sources": ["memory", "sessions"]},
    )
    assert policy_of(settings) is not None
    async with runtime(settings, redis) as rt:
        backfill = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        report = await run_ingest_sweep(rt)
        index = await run_index_sync(rt)
        assert index.ok
        reasons = dict(
            await rt.store.read(
                lambda c: c.execute("SELECT session_id, excluded_reason FROM ingest_checkpoints").fetchall()
            )
        )
        indexed = await rt.store.read(
            lambda c: sorted(r[0] for r in c.execute("SELECT DISTINCT session_id FROM memory_index_chunks"))
        )
    assert reasons["s-incognito"] == REASON_INCOGNITO
    assert reasons["s-cron-parent"] == REASON_CRON
    assert reasons["s-telegram"] == "sessionKey:agent:*:telegram:*"
    assert reasons["s-main"] is None
    assert report is not None
    corpus = "".join(p.read_text() for p in (tmp_path / "ws/memory/.dreams/session-corpus").iterdir())
    assert "ferry leaves" in corpus and "harbour" not in corpus
    assert "harbour" not in (tmp_path / "ws" / "DREAMS.md").read_text()
    assert backfill.sessions_excluded == {
        REASON_INCOGNITO: 2,
        REASON_CRON: 1,
        "sessionKey:agent:*:telegram:*": 1,
    }
    assert indexed == ["s-main"]
