"""Writes pi v3 transcripts (reference §3.1): the format `transcript.py` reads.

memoryd never writes an agent's transcript: the agents' gateway does, and memoryd only reads
it. This writer exists so that everything that makes transcripts for memoryd to read makes
them one way: `memoryd demo init` (the example store), the tests' session builders, the
benchmark corpus and the OpenClaw fixture (whose v4 events have the same shape).

    lines = transcript("s1", [Turn("user", "hello", 1_700_000_000_000, meta={"senderIsOwner": True})])
    path.write_bytes(encode_lines(lines))

A line is compact UTF-8 JSON, as the gateway's JSON.stringify writes it; a lone surrogate
(a string cut mid-pair) is written as its escape, as JSON.stringify does too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

VERSION = 3
DEFAULT_CWD = "/srv/agent"


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a transcript."""

    role: str  # user | assistant | toolResult
    content: str | list[dict[str, Any]]  # text, or content blocks ({"type": "text", "text": …}, …)
    timestamp_ms: int
    meta: dict[str, Any] = field(default_factory=dict)  # __openclaw (senderIsOwner, …); omitted if empty
    fields: dict[str, Any] = field(default_factory=dict)  # other message fields (toolCallId, …)


def session_header(
    session_id: str, *, cwd: str = DEFAULT_CWD, timestamp: str | None = None, version: int = VERSION
) -> dict[str, Any]:
    header: dict[str, Any] = {"type": "session", "version": version, "id": session_id}
    if timestamp is not None:
        header["timestamp"] = timestamp
    header["cwd"] = cwd
    return header


def message_line(
    entry_id: str, parent_id: str | None, turn: Turn, *, timestamp: str | None = None
) -> dict[str, Any]:
    """A `message` entry; `timestamp` is the entry's own ISO time, which some writers add."""
    message: dict[str, Any] = {"role": turn.role, "content": turn.content, "timestamp": turn.timestamp_ms}
    message.update(turn.fields)
    if turn.meta:
        message["__openclaw"] = dict(turn.meta)
    line: dict[str, Any] = {"type": "message", "id": entry_id, "parentId": parent_id}
    if timestamp is not None:
        line["timestamp"] = timestamp
    line["message"] = message
    return line


def message_lines(id_prefix: str, turns: Sequence[Turn], first_index: int = 0) -> list[dict[str, Any]]:
    """Messages chained by id: `<prefix>-<i>`, each the parent of the next (an append continues
    the chain from `first_index`)."""
    return [
        message_line(f"{id_prefix}-{i}", f"{id_prefix}-{i - 1}" if i else None, turn)
        for i, turn in enumerate(turns, start=first_index)
    ]


def transcript(session_id: str, turns: Sequence[Turn], *, cwd: str = DEFAULT_CWD) -> list[dict[str, Any]]:
    """A whole transcript: the session header, then the turns chained by id."""
    return [session_header(session_id, cwd=cwd), *message_lines(session_id, turns)]


def encode_line(line: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(line) + b"\n"
    except orjson.JSONEncodeError:  # a lone surrogate: orjson refuses it, an escape carries it
        return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def encode_lines(lines: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(encode_line(line) for line in lines)
