"""What the erased sessions said, and who said it: the text the verifier looks for, and whether a
shared session's subject can be told apart from its other participants.

A shared session can be *separated* when it is live (the source still lists it: ingestion will
read it again) and every user turn of its whole transcript, read to its end, names its sender
(the one rule of daemon/sessions/attribution.py). Then the subject's contributions are exactly
what ingestion skips once the subject is an erased sender: their turns and the assistant's
replies to them; the rest belongs to the other participants. A transcript that cannot be read
whole, or with one unattributed user turn anywhere, is not separable: its derived memory is
removed whole.

Lines are read by the exporter ingestion and the index use (`iter_exported`), so the text looked
for is the text memoryd derives, in the form it derives it.

`contributions_of` is pure (raw transcript lines in); `read_contributions` opens the sources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import orjson

from memoryd.retention.plan import SessionTarget
from memoryd.sessions.model import ArchiveInfo, SessionInfo
from memoryd.sessions.source import session_source_for
from memoryd.sessions.transcript import Carry, iter_exported
from memoryd.settings import Settings


@dataclass(frozen=True, slots=True)
class Contributions:
    texts: tuple[str, ...]  # every exported message's text (whitespace collapsed, as exported)
    subject_texts: tuple[str, ...]  # the messages skipped once `user` is an erased sender
    attributed: bool  # every user turn names its sender
    senders: frozenset[str]  # every sender named


def contributions_of(lines: Sequence[bytes], user: str | None) -> Contributions:
    carry = Carry()
    everything = list(iter_exported(lines, {}, carry))
    senders = frozenset(line.sender for line in everything if line.sender is not None)
    subject: list[str] = []
    if user is not None and user in senders:
        kept = {line.line_number for line in iter_exported(lines, {}, erased=user.__eq__)}
        subject = [_body(line.text) for line in everything if line.line_number not in kept]
    texts = tuple(_body(line.text) for line in everything)
    return Contributions(texts, tuple(subject), carry.unattributed == 0, senders)


def _body(text: str) -> str:
    """An exported line's message text without its "User: " / "Assistant: " prefix: the verifier
    derives every form memoryd stores from the message text itself."""
    return text.partition(": ")[2]


def _sender_pattern(user: str) -> re.Pattern[bytes]:
    """Matches every transcript line that may name `user` as a sender: one holding the id as
    JSON writes it (raw UTF-8, or ASCII-escaped), or any `\\u` escape, which can spell any
    character (such a line is parsed whatever it holds)."""
    forms = [json.dumps(user)[1:-1].encode("ascii"), b"\\u"]
    try:
        forms.append(orjson.dumps(user)[1:-1])
    except TypeError:  # a lone surrogate: only the escaped form can spell it
        pass
    return re.compile(b"|".join(re.escape(f) for f in dict.fromkeys(forms)))


def names_sender(lines: Iterable[bytes], user: str) -> bool:
    """Whether a transcript names `user` as the sender of a turn. Lines that cannot hold the id
    as a sender are not parsed (one regex search in C per line)."""
    may_name = _sender_pattern(user).search
    for line in lines:
        if may_name(line) is not None and any(e.sender == user for e in iter_exported([line], {}, Carry())):
            return True
    return False


def senders_of(lines: Iterable[bytes]) -> frozenset[str]:
    """Every sender a transcript names."""
    return frozenset(e.sender for e in iter_exported(lines, {}, Carry()) if e.sender is not None)


def spoken_in(settings: Settings, agent: str, user: str) -> dict[str, frozenset[str]]:
    """The sessions of `agent`, live or archived, in whose transcripts `user` is the sender of a
    turn, with every sender each names (transcripts read whole: a backlog ingestion has not
    reached yet counts). A transcript that cannot be read is passed over: nothing was derived
    of what cannot be read."""
    source = session_source_for(settings, agent)
    windows: list[SessionInfo | ArchiveInfo] = [*source.list_sessions().sessions, *source.list_archives()]
    found: dict[str, set[str]] = {}
    for where in windows:
        try:
            with source.open_transcript(where) as lines:
                if not names_sender(lines, user):
                    continue
            with source.open_transcript(where) as lines:
                found.setdefault(where.session_id, set()).update(senders_of(lines))
        except Exception:  # noqa: BLE001 - unreadable: nothing of it was ingested either
            continue
    return {sid: frozenset(senders) for sid, senders in found.items()}


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
    """The transcript's contributions, read whole; None when it cannot be read whole (a missing
    or unreadable transcript: what was derived of it cannot be told apart)."""
    source = session_source_for(settings, where.agent_id)
    try:
        with source.open_transcript(where) as lines:
            return contributions_of(list(lines), user)
    except Exception:  # noqa: BLE001 - any failure to read it whole makes it unseparable
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
        found = [_read(settings, w, user) for w in windows]
        read = [c for c in found if c is not None]
        whole = bool(found) and len(read) == len(found)  # every window of it read to its end
        separable = t.shared and t.session_id in live and whole and all(c.attributed for c in read)
        out.append(replace(t, separable=separable))
        for c in read:
            texts += c.subject_texts if separable else c.texts
    return out, texts


def session_texts(settings: Settings, sessions: Sequence[SessionInfo | ArchiveInfo]) -> list[str]:
    """Every message's text of these transcripts (forget --verify's subject)."""
    return session_voices(settings, sessions).texts


@dataclass(frozen=True, slots=True)
class Voices:
    """What sessions said and every id they name: their own, their participants', their senders'."""

    texts: list[str]
    ids: set[str]


def session_voices(settings: Settings, sessions: Sequence[SessionInfo | ArchiveInfo]) -> Voices:
    """Every message's text of these transcripts, and the ids they name (text and ids that
    survive a purge: what the verifier must not take for the subject's)."""
    voices = Voices([], set())
    for s in sessions:
        voices.ids.add(s.session_id)
        if isinstance(s, SessionInfo):
            voices.ids.update(p.actor_id for p in s.participants)
        found = _read(settings, s, None)
        if found is not None:
            voices.texts.extend(found.texts)
            voices.ids.update(found.senders)
    return voices
