"""Two users with one direct session each (nora's and omar's), ingested and indexed by the
erasure tests: erasing nora must leave omar's session whole."""

from __future__ import annotations

from pathlib import Path

from daemon.settings import Settings
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."


def add_two_users(sessions_root: Path) -> SessionStoreBuilder:
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", NORA_TEXT), Msg("assistant", "Noted: " + NORA_TEXT)],
        participants=[{"actorId": "nora"}],
        chatType="direct",
    )
    b.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        [Msg("user", OMAR_TEXT), Msg("assistant", "Noted: " + OMAR_TEXT)],
        participants=[{"actorId": "omar"}],
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
