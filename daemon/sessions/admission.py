"""Admission: whether a session may be ingested, decided from metadata alone (reference §4).

Pure functions over frozen values; no transcript is opened here, and nothing here can open one.

Two kinds of "no":
* `exclusion_reason` — the reference's §4.2 exactly: `forgotten` first (regardless of policy),
  then `hookExternalContentSource:<v>`, `channel:<v>`, `chatType:<v>`. Exact, case-sensitive
  equality; missing metadata never matches.
* `ineligibility_reason` — what automatic ingestion never reads whatever the policy says:
  non-interactive sessions, cron sessions (a `cron:<id>` parent as well as its runs, whatever
  kind its metadata records), dreaming-narrative sessions and compaction checkpoint twins.

Beyond the reference, two rules on the session key (`key_reason`), which every path that reads a
transcript into memory applies (ingestion, backfill and transcript indexing, archives included):
an incognito session (`agent:<id>:dashboard:incognito-<uuid>`, or any key with an
`incognito-` part) never feeds memory, whatever the policy says; and the policy may list
session-key patterns (`session_keys`, shell-style) to keep out, reason `sessionKey:<pattern>`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatchcase

from memoryd.sessions.model import SessionInfo
from memoryd.settings import ExcludeSessions, Settings
from memoryd.store.tombstones import REASON_FORGOTTEN

REASON_DREAMING_NARRATIVE = "dreamingNarrative"
REASON_CHECKPOINT_TWIN = "checkpointTwin"
REASON_INCOGNITO = "incognito"
REASON_CRON = "cronSession"
SESSION_KEY_REASON_PREFIX = "sessionKey:"
SESSION_KIND_REASON_PREFIX = "sessionKind:"
CHECKPOINT_TWIN_RE = re.compile(r"\.checkpoint\..+\.jsonl$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    hook_external_content_sources: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    chat_types: frozenset[str] = frozenset()
    session_keys: tuple[str, ...] = ()  # shell-style patterns, in the configured order

    @classmethod
    def from_settings(cls, config: ExcludeSessions) -> AdmissionPolicy | None:
        """None when every list is empty (the reference's "no policy"). Settings already trimmed
        the configured values and dropped empty ones."""
        policy = cls(
            frozenset(config.hook_external_content_sources),
            frozenset(config.channels),
            frozenset(config.chat_types),
            tuple(config.session_keys),
        )
        if not (
            policy.hook_external_content_sources
            or policy.channels
            or policy.chat_types
            or policy.session_keys
        ):
            return None
        return policy


POLICY_REASON_PREFIXES = ("hookExternalContentSource:", "channel:", "chatType:", SESSION_KEY_REASON_PREFIX)


def policy_of(settings: Settings) -> AdmissionPolicy | None:
    """The configured policy (`memory_policy.exclude_sessions`): one for every path that reads
    a transcript into memory (ingest, backfill, transcript indexing)."""
    return AdmissionPolicy.from_settings(settings.memory_policy.exclude_sessions)


def exclusion_reason(
    session: SessionInfo, policy: AdmissionPolicy | None, forgotten: Collection[str]
) -> str | None:
    """The reference's `sessionExclusionReason` (the reason string, or None when admitted), then
    the key's own reason (`key_reason`)."""
    if session.session_id in forgotten:
        return REASON_FORGOTTEN
    if policy is None:
        return key_reason(session.session_key, None)
    hook = session.hook_source
    if hook and hook in policy.hook_external_content_sources:
        return f"hookExternalContentSource:{hook}"
    if session.channel and session.channel in policy.channels:
        return f"channel:{session.channel}"
    if session.chat_type and session.chat_type in policy.chat_types:
        return f"chatType:{session.chat_type}"
    return key_reason(session.session_key, policy)


def is_incognito_key(key: str | None) -> bool:
    """Whether a session key names an incognito session: a part after `agent:<id>:` that starts
    with `incognito-` (the dashboard's `agent:<id>:dashboard:incognito-<uuid>`)."""
    if not key or "incognito-" not in key:
        return False
    return any(part.startswith("incognito-") for part in key.split(":")[2:])


def is_cron_key(key: str | None) -> bool:
    """A cron job's parent session (`cron:<id>`) or a run under it (`…:cron:…`)."""
    return key is not None and (key.startswith("cron:") or ":cron:" in key)


def key_reason(key: str | None, policy: AdmissionPolicy | None) -> str | None:
    """The session key's own reason to stay out: `incognito` whatever the policy says, then the
    first policy pattern it matches (`sessionKey:<pattern>`); None for a session without a key."""
    if is_incognito_key(key):
        return REASON_INCOGNITO
    if key and policy is not None:
        for pattern in policy.session_keys:
            if fnmatchcase(key, pattern):
                return SESSION_KEY_REASON_PREFIX + pattern
    return None


def ineligibility_reason(session: SessionInfo) -> str | None:
    """Why automatic ingestion never reads this session, or None if it may."""
    if is_incognito_key(session.session_key):
        return REASON_INCOGNITO
    if session.generated_by_narrative:
        return REASON_DREAMING_NARRATIVE
    if session.session_kind != "interactive":
        return SESSION_KIND_REASON_PREFIX + session.session_kind
    if is_cron_key(session.session_key):
        return REASON_CRON  # recorded as interactive, but a cron job's session all the same
    return REASON_CHECKPOINT_TWIN if _is_checkpoint_twin(session) else None


def _is_checkpoint_twin(session: SessionInfo) -> bool:
    if ".checkpoint." not in session.session_id.lower() and ".checkpoint." not in session.locator.lower():
        return False  # the common case, without a regex per session
    name = session.locator.rsplit("/", 1)[-1] if session.locator else f"{session.session_id}.jsonl"
    return bool(CHECKPOINT_TWIN_RE.search(name) or CHECKPOINT_TWIN_RE.search(f"{session.session_id}.jsonl"))


def admission_reason(
    session: SessionInfo, policy: AdmissionPolicy | None, forgotten: Collection[str]
) -> str | None:
    """The one reason a sweep records: forgotten first, then ineligibility, then the policy."""
    if session.session_id in forgotten:
        return REASON_FORGOTTEN
    return ineligibility_reason(session) or exclusion_reason(session, policy, forgotten)


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """One admission rule as checked for one session: what the session has, and the reason it
    gives when it keeps the session out (None: it lets the session through)."""

    rule: str
    value: str | None  # what the session has for the rule ("-" when it has nothing)
    reason: str | None


def explain_admission(
    session: SessionInfo, policy: AdmissionPolicy | None, forgotten: Collection[str]
) -> tuple[RuleCheck, ...]:
    """Every rule `admission_reason` applies, in its order, each with its outcome. The first
    reason in the list is the decision (`admission_reason` gives the same, faster)."""
    key = session.session_key
    p = policy or AdmissionPolicy()
    hook, channel, chat = session.hook_source, session.channel, session.chat_type
    pattern = next((pat for pat in p.session_keys if key and fnmatchcase(key, pat)), None)
    kind = session.session_kind
    return (
        RuleCheck(
            "forgotten",
            "yes" if session.session_id in forgotten else "no",
            _if(session.session_id in forgotten, REASON_FORGOTTEN),
        ),
        RuleCheck("incognito", key or "-", _if(is_incognito_key(key), REASON_INCOGNITO)),
        RuleCheck(
            "dreamingNarrative",
            "yes" if session.generated_by_narrative else "no",
            _if(session.generated_by_narrative, REASON_DREAMING_NARRATIVE),
        ),
        RuleCheck("sessionKind", kind, _if(kind != "interactive", SESSION_KIND_REASON_PREFIX + kind)),
        RuleCheck("cronSession", key or "-", _if(is_cron_key(key), REASON_CRON)),
        RuleCheck(
            "checkpointTwin",
            session.locator.rsplit("/", 1)[-1] or session.session_id,
            _if(_is_checkpoint_twin(session), REASON_CHECKPOINT_TWIN),
        ),
        RuleCheck(
            "hookExternalContentSource",
            hook or "-",
            _if(bool(hook) and hook in p.hook_external_content_sources, f"hookExternalContentSource:{hook}"),
        ),
        RuleCheck(
            "channel", channel or "-", _if(bool(channel) and channel in p.channels, f"channel:{channel}")
        ),
        RuleCheck("chatType", chat or "-", _if(bool(chat) and chat in p.chat_types, f"chatType:{chat}")),
        RuleCheck("sessionKey", key or "-", None if pattern is None else SESSION_KEY_REASON_PREFIX + pattern),
    )


def explain_key(
    session_id: str, key: str | None, policy: AdmissionPolicy | None, forgotten: Collection[str]
) -> tuple[RuleCheck, ...]:
    """The rules that apply to a session known by its id and key alone (an archive, a session
    the source no longer lists): the forgotten record and the key's own rules."""
    pattern = next(
        (pat for pat in (policy or AdmissionPolicy()).session_keys if key and fnmatchcase(key, pat)), None
    )
    return (
        RuleCheck(
            "forgotten",
            "yes" if session_id in forgotten else "no",
            _if(session_id in forgotten, REASON_FORGOTTEN),
        ),
        RuleCheck("incognito", key or "-", _if(is_incognito_key(key), REASON_INCOGNITO)),
        RuleCheck("cronSession", key or "-", _if(is_cron_key(key), REASON_CRON)),
        RuleCheck("sessionKey", key or "-", None if pattern is None else SESSION_KEY_REASON_PREFIX + pattern),
    )


def _if(condition: bool, reason: str) -> str | None:
    return reason if condition else None
