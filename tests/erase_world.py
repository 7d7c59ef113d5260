"""Two users with one direct session each (nora's and omar's), ingested and indexed by the
erasure tests: erasing nora must leave omar's session whole."""

from __future__ import annotations

from pathlib import Path

from memoryd.settings import Settings
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."


def add_two_users(sessions_root: Path, *, acknowledged: bool = True) -> SessionStoreBuilder:
    """Each user's message, and (unless not `acknowledged`) the assistant's "Noted: …" reply."""
    b = SessionStoreBuilder(sessions_root, "main")
    for user, text in (("nora", NORA_TEXT), ("omar", OMAR_TEXT)):
        messages = [Msg("user", text)] + ([Msg("assistant", "Noted: " + text)] if acknowledged else [])
        b.add(
            f"agent:main:dm:{user}",
            f"sess-{user}-1",
            messages,
            participants=[{"actorId": user}],
            chatType="direct",
        )
    return b


def build_world(tmp_path: Path, sessions_root: Path, unique: str) -> Settings:
    """The two users' sessions, and settings that index transcripts with the hashing embedder."""
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}},
    )
    add_two_users(sessions_root)
    return settings


# --- a group chat whose second participant is erased -------------------------------------------

NADIA_GROUP_TEXT = "Remember that the saffron kayak club meets at the north pier on Thursdays."
NADIA_DIRECT_TEXT = "Remember that my locker code at the quarry gym is four seven nine two."
OLGA_GROUP_TEXT = "Remember that the team dinner is booked at Trattoria Roma for Friday."
OLGA_DIRECT_TEXT = "Remember that the greenhouse thermostat must stay at nineteen degrees."
NADIA_WORDS = ("saffron kayak", "north pier", "locker code", "quarry gym")
GROUP_KEY = "agent:main:telegram:group:-100555"
ARCHIVE_TS = "2026-08-25T10-00-00.000Z"


def said_by(actor: str | None, text: str) -> list[Msg]:
    """A user turn by `actor` (named as its sender; None: a transcript without senders) and the
    assistant's reply."""
    identity = {"type": "observation", "pluginId": "telegram", "senderKind": "human", "id": actor}
    extra = {"senderId": actor, "senderIdentity": identity} if actor else {}
    return [Msg("user", text, extra=extra), Msg("assistant", "Noted: " + text)]


def add_group_world(sessions_root: Path, *, senders: bool = True) -> SessionStoreBuilder:
    """A telegram group where olga speaks first and nadia second (with per-message senders, or
    without), a direct session of each, and omar's: everything the erasure of nadia must and
    must not reach."""
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        GROUP_KEY,
        "sess-group-1",
        said_by("olga" if senders else None, OLGA_GROUP_TEXT)
        + said_by("nadia" if senders else None, NADIA_GROUP_TEXT),
        participants=[{"actorId": "olga"}, {"actorId": "nadia"}],
        chatType="group",
        channel="telegram",
    )
    b.add(
        "agent:main:dm:nadia",
        "sess-nadia-1",
        [Msg("user", NADIA_DIRECT_TEXT), Msg("assistant", "Noted: " + NADIA_DIRECT_TEXT)],
        participants=[{"actorId": "nadia"}],
        chatType="direct",
    )
    for user, text in (("olga", OLGA_DIRECT_TEXT), ("omar", OMAR_TEXT)):
        b.add(
            f"agent:main:dm:{user}",
            f"sess-{user}-1",
            [Msg("user", text), Msg("assistant", "Noted: " + text)],
            participants=[{"actorId": user}],
            chatType="direct",
        )
    return b


def reset_nadias_session(b: SessionStoreBuilder) -> None:
    """`/reset` after ingestion: the transcript becomes an archive and the key gets a new window
    whose metadata no longer names the old session."""
    (b.dir / "sess-nadia-1.jsonl").rename(b.dir / f"sess-nadia-1.jsonl.reset.{ARCHIVE_TS}")
    b.add(
        "agent:main:dm:nadia",
        "sess-nadia-2",
        [Msg("user", "Hello again, a new conversation begins here today.")],
        participants=[{"actorId": "nadia"}],
        chatType="direct",
    )
