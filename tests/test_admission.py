"""Admission policy (reference §4.2): exact reasons, exact precedence, metadata only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.sessions.admission import (
    AdmissionPolicy,
    admission_reason,
    exclusion_reason,
    ineligibility_reason,
)
from memoryd.sessions.model import SessionInfo
from memoryd.settings import ExcludeSessions


def session(
    sid: str = "s1",
    *,
    hook: str | None = None,
    channel: str | None = None,
    chat: str | None = None,
    kind: str = "interactive",
    key: str = "agent:main:main",
    narrative: bool = False,
) -> SessionInfo:
    return SessionInfo(
        agent_id="main",
        session_id=sid,
        session_key=key,
        session_kind=kind,  # type: ignore[arg-type]
        chat_type=chat,
        channel=channel,
        hook_source=hook,
        generated_by_narrative=narrative,
        locator=f"/x/{sid}.jsonl",
    )


POLICY = AdmissionPolicy(frozenset({"gmail", "email"}), frozenset({"discord"}), frozenset({"group"}))

values = st.sampled_from([None, "gmail", "email", "webhook", "discord", "slack", "group", "direct", "Gmail"])


@given(hook=values, channel=values, chat=values, forgotten=st.booleans())
def test_reason_follows_the_reference_precedence(hook, channel, chat, forgotten) -> None:
    s = session(hook=hook, channel=channel, chat=chat)
    reason = exclusion_reason(s, POLICY, {"s1"} if forgotten else set())
    if forgotten:
        expected = "forgotten"
    elif hook in POLICY.hook_external_content_sources:
        expected = f"hookExternalContentSource:{hook}"
    elif channel in POLICY.channels:
        expected = f"channel:{channel}"
    elif chat in POLICY.chat_types:
        expected = f"chatType:{chat}"
    else:
        expected = None
    assert reason == expected


def test_matches_are_exact_and_case_sensitive() -> None:
    assert exclusion_reason(session(hook="Gmail"), POLICY, ()) is None
    assert exclusion_reason(session(hook="gmail "), POLICY, ()) is None  # metadata is not trimmed
    assert exclusion_reason(session(channel="discord-eu"), POLICY, ()) is None
    assert exclusion_reason(session(chat="groups"), POLICY, ()) is None


def test_missing_metadata_never_matches() -> None:
    assert exclusion_reason(session(), POLICY, ()) is None


def test_forgotten_applies_without_any_policy() -> None:
    assert exclusion_reason(session(hook="gmail"), None, {"s1"}) == "forgotten"
    assert exclusion_reason(session(hook="gmail"), None, set()) is None


def test_a_coarse_webhook_classification_never_matches_email() -> None:
    only_email = AdmissionPolicy(frozenset({"email"}))
    assert exclusion_reason(session(hook="webhook"), only_email, ()) is None


def test_policy_from_settings_is_none_when_every_list_is_empty_and_trims_values() -> None:
    assert AdmissionPolicy.from_settings(ExcludeSessions()) is None
    policy = AdmissionPolicy.from_settings(ExcludeSessions(channels=[" discord ", ""]))
    assert policy is not None and policy.channels == frozenset({"discord"})


def test_non_interactive_narrative_and_checkpoint_twins_are_ineligible() -> None:
    assert ineligibility_reason(session(kind="cron")) == "sessionKind:cron"
    assert ineligibility_reason(session(kind="subagent")) == "sessionKind:subagent"
    assert ineligibility_reason(session(narrative=True)) == "dreamingNarrative"
    assert ineligibility_reason(session("p.checkpoint.0b1c.jsonl"[:-6])) == "checkpointTwin"
    assert ineligibility_reason(session()) is None


def test_forgotten_wins_over_ineligibility_and_ineligibility_over_policy() -> None:
    cron_gmail = session(kind="cron", hook="gmail")
    assert admission_reason(cron_gmail, POLICY, {"s1"}) == "forgotten"
    assert admission_reason(cron_gmail, POLICY, ()) == "sessionKind:cron"
    assert admission_reason(session(hook="gmail"), POLICY, ()) == "hookExternalContentSource:gmail"
