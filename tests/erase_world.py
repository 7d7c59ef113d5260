"""Two users with one direct session each (nora's and omar's), ingested and indexed by the
erasure tests: erasing nora must leave omar's session whole."""

from __future__ import annotations

from pathlib import Path

from daemon.settings import Settings
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
