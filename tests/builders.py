"""Builders for real session stores on disk: sessions.json, and pi v3 JSONL transcripts written
with the one transcript writer (daemon/sessions/transcript_writer.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.sessions.transcript_writer import Turn, encode_lines, message_lines, transcript

DAY_MS = 86_400_000


@dataclass
class Msg:
    role: str  # user | assistant | toolResult
    text: str | list[dict[str, Any]]
    owner: bool = True  # user turns: __openclaw.senderIsOwner
    ts: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # merged into __openclaw

    def turn(self, default_ts: int) -> Turn:
        meta: dict[str, Any] = dict(self.extra)
        if self.role == "user" and self.owner:
            meta["senderIsOwner"] = True
        return Turn(self.role, self.text, self.ts if self.ts is not None else default_ts, meta=meta)


class SessionStoreBuilder:
    """Writes `<root>/agents/<agent>/sessions/{sessions.json, <id>.jsonl}`."""

    def __init__(self, root: Path, agent_id: str = "main", base_ms: int | None = None):
        self.root = root
        self.agent_id = agent_id
        self.dir = root / "agents" / agent_id / "sessions"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, dict[str, Any]] = {}
        import time

        self.base_ms = base_ms if base_ms is not None else (int(time.time() * 1000) // DAY_MS - 1) * DAY_MS

    def add(
        self,
        key: str,
        sid: str,
        messages: list[Msg] | None = None,
        *,
        kind: str = "interactive",
        write_transcript: bool = True,
        **meta: Any,
    ) -> Path:
        entry: dict[str, Any] = {
            "sessionId": sid,
            "sessionKind": kind,
            "createdAt": self.base_ms,
            "updatedAt": self.base_ms + 60_000,
            **meta,
        }
        self.entries[key] = entry
        self.save()
        path = self.dir / f"{sid}.jsonl"
        if write_transcript:
            self.write_transcript(sid, messages or [])
        return path

    def turns(self, messages: list[Msg], first_index: int = 0) -> list[Turn]:
        """Message i is at base_ms + i seconds unless it says otherwise."""
        return [m.turn(self.base_ms + i * 1000) for i, m in enumerate(messages, start=first_index)]

    def write_transcript(self, sid: str, messages: list[Msg]) -> Path:
        path = self.dir / f"{sid}.jsonl"
        path.write_bytes(encode_lines(transcript(sid, self.turns(messages), cwd="/srv")))
        return path

    def append(self, sid: str, messages: list[Msg], start_index: int) -> None:
        with (self.dir / f"{sid}.jsonl").open("ab") as fh:
            fh.write(encode_lines(message_lines(sid, self.turns(messages, start_index), start_index)))

    def archive(
        self,
        sid: str,
        reason: str = "reset",
        ts: str = "2026-08-25T10-00-00.000Z",
        messages: list[Msg] | None = None,
    ) -> Path:
        path = self.dir / f"{sid}.jsonl.{reason}.{ts}"
        path.write_bytes(encode_lines(transcript(sid, self.turns(messages or []), cwd="/srv")))
        return path

    def save(self) -> None:
        (self.dir / "sessions.json").write_text(json.dumps(self.entries, indent=1))


def conversation(topic: str, sid: str, n: int = 4) -> list[Msg]:
    """An owner/assistant exchange whose lines are long enough to be staged (>= 12 chars)."""
    out: list[Msg] = []
    for i in range(n):
        if i % 2 == 0:
            out.append(Msg("user", f"Remember that the {topic} rota changes on day {i} for the {sid} team."))
        else:
            out.append(
                Msg("assistant", f"Understood, the {topic} rota changes on day {i - 1} for the {sid} team.")
            )
    return out


def exchange(word: str) -> list[Msg]:
    """One owner message about the `word` rota and the assistant's acknowledgement."""
    return [
        Msg("user", f"Remember that the {word} rota changes every Tuesday for the ops team."),
        Msg("assistant", f"Understood: the {word} rota changes every Tuesday for the ops team."),
    ]
