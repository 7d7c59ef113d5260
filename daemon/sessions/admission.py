"""Admission: whether a session may be ingested, decided from metadata alone (reference §4).

Pure functions over frozen values; no transcript is opened here, and nothing here can open one.

Two kinds of "no":
* `exclusion_reason` — the reference's §4.2 exactly: `forgotten` first (regardless of policy),
  then `hookExternalContentSource:<v>`, `channel:<v>`, `chatType:<v>`. Exact, case-sensitive
  equality; missing metadata never matches.
* `ineligibility_reason` — what automatic ingestion never reads whatever the policy says:
  non-interactive sessions, dreaming-narrative sessions and compaction checkpoint twins.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from daemon.sessions.model import SessionInfo
from daemon.settings import ExcludeSessions, Settings
from daemon.store.tombstones import REASON_FORGOTTEN

REASON_DREAMING_NARRATIVE = "dreamingNarrative"
REASON_CHECKPOINT_TWIN = "checkpointTwin"
SESSION_KIND_REASON_PREFIX = "sessionKind:"
CHECKPOINT_TWIN_RE = re.compile(r"\.checkpoint\..+\.jsonl$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    hook_external_content_sources: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    chat_types: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, config: ExcludeSessions) -> AdmissionPolicy | None:
        """None when every list is empty (the reference's "no policy"). Settings already trimmed
        the configured values and dropped empty ones."""
        policy = cls(
            frozenset(config.hook_external_content_sources),
            frozenset(config.channels),
            frozenset(config.chat_types),
        )
        if not (policy.hook_external_content_sources or policy.channels or policy.chat_types):
            return None
        return policy


POLICY_REASON_PREFIXES = ("hookExternalContentSource:", "channel:", "chatType:")


def policy_of(settings: Settings) -> AdmissionPolicy | None:
    """The configured policy (`memory_policy.exclude_sessions`): one for every path that reads
    a transcript into memory (ingest, backfill, transcript indexing)."""
    return AdmissionPolicy.from_settings(settings.memory_policy.exclude_sessions)


def exclusion_reason(
    session: SessionInfo, policy: AdmissionPolicy | None, forgotten: Collection[str]
) -> str | None:
    """The reference's `sessionExclusionReason`: the reason string, or None when admitted."""
    if session.session_id in forgotten:
        return REASON_FORGOTTEN
    if policy is None:
        return None
    hook = session.hook_source
    if hook and hook in policy.hook_external_content_sources:
        return f"hookExternalContentSource:{hook}"
    if session.channel and session.channel in policy.channels:
        return f"channel:{session.channel}"
    if session.chat_type and session.chat_type in policy.chat_types:
        return f"chatType:{session.chat_type}"
    return None


def ineligibility_reason(session: SessionInfo) -> str | None:
    """Why automatic ingestion never reads this session, or None if it may."""
    if session.generated_by_narrative:
        return REASON_DREAMING_NARRATIVE
    if session.session_kind != "interactive":
        return SESSION_KIND_REASON_PREFIX + session.session_kind
    if ".checkpoint." not in session.session_id.lower() and ".checkpoint." not in session.locator.lower():
        return None  # the common case, without a regex per session
    name = session.locator.rsplit("/", 1)[-1] if session.locator else f"{session.session_id}.jsonl"
    if CHECKPOINT_TWIN_RE.search(name) or CHECKPOINT_TWIN_RE.search(f"{session.session_id}.jsonl"):
        return REASON_CHECKPOINT_TWIN
    return None


def admission_reason(
    session: SessionInfo, policy: AdmissionPolicy | None, forgotten: Collection[str]
) -> str | None:
    """The one reason a sweep records: forgotten first, then ineligibility, then the policy."""
    if session.session_id in forgotten:
        return REASON_FORGOTTEN
    return ineligibility_reason(session) or exclusion_reason(session, policy, forgotten)
