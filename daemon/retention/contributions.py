"""What the erased sessions said, and who said it: the text the verifier looks for, and whether a
shared session's subject can be told apart from its other participants.

A shared session can be *separated* when it is live (the source still lists it: ingestion will
read it again) and every user turn of its transcript names its sender (`__openclaw.senderId`).
Then the subject's contributions are exactly their own turns and the assistant's replies to
them; the rest belongs to the other participants. Otherwise the whole transcript is the
subject's as far as an erasure knows.

`contributions_of` is pure (raw transcript lines in); `read_contributions` opens the sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import orjson

from daemon.constants import VERIFY_MAX_MESSAGES_PER_SESSION
from daemon.retention.plan import SessionTarget
from daemon.sessions.model import ArchiveInfo, SessionInfo
from daemon.sessions.source import session_source_for
from daemon.settings import Settings


@dataclass(frozen=True, slots=True)
class Contributions:
    texts: tuple[str, ...]  # every message's text
    subject_texts: tuple[str, ...]  # the given user's turns and the replies to them
    attributed: bool  # every user turn names its sender


def _message(line: bytes) -> tuple[str | None, str | None, list[str]]:
    """(role, sender, texts) of one transcript line; (None, None, []) for anything else."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, None, []
    message = event.get("message") if isinstance(event, dict) else None
    if not isinstance(message, dict):
        return None, None, []
    meta = message.get("__openclaw")
    sender = meta.get("senderId") if isinstance(meta, dict) else None
    content = message.get("content")
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    else:
        texts = []
    role = message.get("role")
    return (role if isinstance(role, str) else None), (sender if isinstance(sender, str) else None), texts


def contributions_of(lines: Iterable[bytes], user: str | None) -> Contributions:
    texts: list[str] = []
    own: list[str] = []
    attributed = True
    theirs = False  # the current turn is the user's
    for count, line in enumerate(lines):
        if count >= VERIFY_MAX_MESSAGES_PER_SESSION:
            break
        role, sender, found = _message(bytes(line))
        if role == "user":
            attributed = attributed and sender is not None
            theirs = user is not None and sender == user
        texts += found
        if theirs and role in ("user", "assistant"):
            own += found
    return Contributions(tuple(texts), tuple(own), attributed)


def _sources(
    settings: Settings, agent: str, ids: set[str]
) -> tuple[dict[str, SessionInfo], dict[str, list[ArchiveInfo]]]:
    source = session_source_for(settings, agent)
    live = {s.session_id: s for s in source.list_sessions().sessions if s.session_id in ids}
    archived: dict[str, list[ArchiveInfo]] = {}
    for a in source.list_archives():
        if a.session_id in ids:
            archived.setdefault(a.session_id, []).append(a)
    return live, archived


def _read(settings: Settings, where: SessionInfo | ArchiveInfo, user: str | None) -> Contributions | None:
    source = session_source_for(settings, where.agent_id)
    try:
        with source.open_transcript(where) as lines:
            return contributions_of(lines, user)
    except OSError:
        return None  # no transcript: nothing of it can have been derived
    except Exception:  # an unreadable transcript hides text, never data: judge it unseparable
        return None


def read_contributions(
    settings: Settings, targets: Sequence[SessionTarget], user: str | None
) -> tuple[list[SessionTarget], list[str]]:
    """The targets, shared ones marked `separable` where they can be, and the text the verifier
    must look for: all of a session's, or the subject's own in a separable one."""
    by_agent: dict[str, set[str]] = {}
    for t in targets:
        by_agent.setdefault(t.agent_id, set()).add(t.session_id)
    sources = {agent: _sources(settings, agent, ids) for agent, ids in by_agent.items()}
    out: list[SessionTarget] = []
    texts: list[str] = []
    for t in targets:
        live, archived = sources[t.agent_id]
        windows: list[SessionInfo | ArchiveInfo] = [
            *([live[t.session_id]] if t.session_id in live else []),
            *archived.get(t.session_id, []),
        ]
        read = [c for c in (_read(settings, w, user) for w in windows) if c is not None]
        separable = t.shared and t.session_id in live and bool(read) and all(c.attributed for c in read)
        out.append(replace(t, separable=separable))
        for c in read:
            texts += c.subject_texts if separable else c.texts
    return out, texts


def session_texts(settings: Settings, sessions: Sequence[SessionInfo | ArchiveInfo]) -> list[str]:
    """Every message's text of these transcripts (forget --verify's subject)."""
    texts: list[str] = []
    for s in sessions:
        found = _read(settings, s, None)
        if found is not None:
            texts += found.texts
    return texts
