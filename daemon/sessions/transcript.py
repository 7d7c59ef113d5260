"""Pi v3 transcript lines -> exported message lines with per-line provenance (reference §1, §3.1).

One JSONL line in, at most one exported line out: "User: …" or "Assistant: …", whitespace
collapsed onto one line, with the origin class of the message:

* a user message with `__openclaw.senderIsOwner: true` is `owner`; one with `internal_system`
  provenance is `system`; any other sender is `untrusted` (never `owner` by default);
* an assistant message is `untrusted` when it carries `__openclaw.turnTainted` or follows a
  tool result with `__openclaw.resultContentSource: "network"` (until the next user message);
  otherwise it takes the class of the turn it answers: `agent` after an owner turn, `system`
  after a system turn, `untrusted` after anything else;
* tool results, tool calls, thinking and non-message entries are never exported.

Bad lines are skipped and counted by kind, never fatal. The exporter is a small state machine;
its state at a cursor (`Carry`) is saved in the checkpoint so a resumed scan classifies the
next lines exactly as a full scan would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Literal, NamedTuple

import orjson

from memoryd.sessions import json_text
from memoryd.sessions.attribution import sender_of
from memoryd.sessions.model import OversizedLine
from memoryd.sessions.redact import REDACT_LOOKAHEAD, redact_secrets

OriginClass = Literal["owner", "agent", "untrusted", "system"]

# Skipped-line kinds, as reported by the sweep (IngestReport.linesSkipped).
SKIP_MALFORMED = "malformedJson"
SKIP_INVALID_UTF8 = "invalidUtf8"
SKIP_NUL = "nulByte"
SKIP_OVERSIZED = "oversizedLine"
SKIP_UNKNOWN_TYPE = "unknownEntryType"
SKIP_KINDS = (SKIP_MALFORMED, SKIP_INVALID_UTF8, SKIP_NUL, SKIP_OVERSIZED, SKIP_UNKNOWN_TYPE)

# Entry types of the pi v3 format and the OpenClaw dialect (reference §3.1). Anything else is
# counted as unknown: a newer writer's entry we do not understand is not guessed at.
KNOWN_ENTRY_TYPES = frozenset(
    {
        "session",
        "message",
        "custom_message",
        "custom",
        "compaction",
        "branch_summary",
        "model_change",
        "thinking_level_change",
        "leaf",
        "label",
        "session_info",
    }
)
_SYSTEM_PROVENANCE = "internal_system"
_NO_META: dict[str, Any] = {}  # read only: stands in for a message without __openclaw metadata


class ExportedLine(NamedTuple):
    """One exported message line. (A NamedTuple: one is built per message, and fast.)"""

    line_number: int  # 1-based transcript line
    text: str  # "User: …" / "Assistant: …", one line, whitespace collapsed
    origin_class: OriginClass
    timestamp_ms: int  # 0 when the message has no usable timestamp
    # A user message's `__openclaw.senderId` (a group chat's per-message sender), else None;
    # `sender_identity` is its `senderIdentity` object as read (not copied), if any.
    sender: str | None = None
    sender_identity: Any = None


class Carry:
    """Provenance state between lines: the class of the last user turn, taint, and whether that
    turn was an erased sender's (its replies are skipped with it). `unattributed` counts the
    user turns read through it that name no sender (daemon/sessions/attribution.py); it is a
    tally of one reading, not state a checkpoint keeps."""

    __slots__ = ("last_user", "tainted", "skipping", "unattributed")

    def __init__(self, last_user: OriginClass | None = None, tainted: bool = False, skipping: bool = False):
        self.last_user = last_user
        self.tainted = tainted
        self.skipping = skipping
        self.unattributed = 0

    def encode(self) -> str:
        return f"{self.last_user or ''}{'+tainted' if self.tainted else ''}{'+skip' if self.skipping else ''}"

    @classmethod
    def decode(cls, text: str) -> Carry:
        base, *flags = text.split("+")
        last = base if base in ("owner", "agent", "untrusted", "system") else None
        return cls(last, "tainted" in flags, "skip" in flags)  # type: ignore[arg-type]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            item["text"]
            for item in content
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str)
        ]
        return " ".join(parts)
    return ""


def _is_internal_system(message: dict[str, Any], meta: dict[str, Any]) -> bool:
    # The provenance has been seen as a string or as {"kind": …}, on the message or its metadata.
    if not (
        "provenance" in meta
        or "inputProvenance" in meta
        or "provenance" in message
        or "inputProvenance" in message
    ):
        return False
    for holder in (meta, message):
        for key in ("provenance", "inputProvenance"):
            value = holder.get(key)
            if value == _SYSTEM_PROVENANCE or (
                isinstance(value, dict) and value.get("kind") == _SYSTEM_PROVENANCE
            ):
                return True
    return False


# The last millisecond a datetime can hold (9999-12-31T23:59:59.999Z): a later timestamp
# would make day bucketing raise and fail the whole sweep.
MAX_TIMESTAMP_MS = 253_402_300_799_999


def _timestamp_ms(message: dict[str, Any], entry: dict[str, Any]) -> int:
    ts = message.get("timestamp")
    if type(ts) is int and 0 < ts <= MAX_TIMESTAMP_MS:
        return ts
    if isinstance(ts, int | float) and not isinstance(ts, bool) and 0 < ts <= MAX_TIMESTAMP_MS:
        return int(ts)
    iso = entry.get("timestamp")
    if isinstance(iso, str):
        try:
            ms = int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
        except (ValueError, OverflowError):
            return 0
        return ms if 0 < ms <= MAX_TIMESTAMP_MS else 0
    return 0


def collapse_ws(text: str, at_least: int | None = None) -> str:
    """Whitespace runs -> one space, trimmed. With `at_least`, the result may be cut short as
    long as it keeps at least that many characters: collapsing is local, so collapsing a prefix
    of the text yields a prefix of the fully collapsed text (long messages cost only a slice)."""
    if at_least is not None and len(text) > at_least + 64:
        head = " ".join(text[: at_least + 64].split())
        if len(head) > at_least:
            return head
    # Most messages are already collapsed. The only whitespace str.isprintable() accepts is
    # " ", so a printable text without doubled or edge spaces is its own result; checking is
    # a fraction of the cost of splitting and joining it.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def export_line(
    raw: bytes,
    line_number: int,
    carry: Carry,
    max_chars: int | None = None,
    erased: Callable[[str], bool] | None = None,
) -> ExportedLine | str | None:
    """Classify one raw transcript line: an ExportedLine, a skip kind (str), or None (not a message
    line worth exporting). Updates `carry`. With `max_chars`, the exported text may be cut once it
    has more than that many characters (callers that keep only a snippet need no more). With
    `erased`, a user turn whose sender it names, and the assistant's replies to that turn, are
    not exported (an erasure removed that sender from this shared session)."""
    # Runs once per transcript line for ingest and the index alike: exact type checks (orjson
    # builds plain dicts) and one dict lookup per field keep it cheap.
    entry = _entry_of(raw)
    if not isinstance(entry, dict):
        return entry  # a skip kind, or None
    kind = entry.get("type")
    if kind != "message":
        return None if kind in KNOWN_ENTRY_TYPES else SKIP_UNKNOWN_TYPE
    message = entry.get("message")
    if type(message) is not dict:
        return SKIP_MALFORMED
    meta = message.get("__openclaw")
    if type(meta) is not dict:
        meta = _NO_META
    role = message.get("role")
    origin: OriginClass
    sender = None
    if role == "user":
        sender = sender_of(meta)
        if sender is None:
            carry.unattributed += 1
        carry.skipping = erased is not None and sender is not None and erased(sender)
        if carry.skipping:
            return None
        origin = _user_origin(message, meta)
        carry.last_user = origin
        carry.tainted = False
        prefix = "User: "
    elif role == "assistant":
        if carry.skipping:
            return None
        origin = _assistant_origin(meta, carry)
        prefix = "Assistant: "
    else:
        if role == "toolResult" and meta.get("resultContentSource") == "network":
            carry.tainted = True
        return None
    body = _body(message.get("content"), max_chars)
    if not body:
        return None
    if sender is None:
        return ExportedLine(line_number, prefix + body, origin, _timestamp_ms(message, entry))
    return ExportedLine(
        line_number, prefix + body, origin, _timestamp_ms(message, entry), sender, meta.get("senderIdentity")
    )


def _body(content: Any, max_chars: int | None) -> str:
    """The message's text on one line ("" when it has none), secrets masked: every path that
    admits transcript text (ingestion, backfill, the transcript index) takes it from here."""
    text = content if type(content) is str else _text_of(content)
    if not text:
        return ""
    # A cut text keeps REDACT_LOOKAHEAD characters past max_chars, so a secret that starts
    # inside the kept part is seen whole (or long enough to match) before it is masked.
    body = collapse_ws(text, None if max_chars is None else max_chars + REDACT_LOOKAHEAD)
    if "\x00" in body:  # an escaped NUL inside a string is valid JSON, but never useful text
        body = body.replace("\x00", "")
    clean = redact_secrets(body)
    if max_chars is not None and len(clean) < len(body) and len(clean) <= max_chars:
        # Masking shrank a cut text below what the caller keeps: mask the whole message.
        clean = redact_secrets(collapse_ws(text).replace("\x00", ""))
    return clean


def _entry_of(raw: bytes) -> dict[str, Any] | str | None:
    """The line's JSON object, a skip kind (str), or None for a blank line."""
    if isinstance(raw, OversizedLine):
        return SKIP_OVERSIZED
    if b"\x00" in raw:
        return SKIP_NUL
    try:
        entry = json_text.loads(raw)  # orjson, reading a lone surrogate as the reference does
    except orjson.JSONDecodeError:
        if not raw.strip():
            return None  # blank lines are not entries
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return SKIP_INVALID_UTF8
        return SKIP_MALFORMED
    return entry if type(entry) is dict else SKIP_MALFORMED


def _user_origin(message: dict[str, Any], meta: dict[str, Any]) -> OriginClass:
    if meta.get("senderIsOwner") is True:
        return "owner"
    return "system" if _is_internal_system(message, meta) else "untrusted"


def _assistant_origin(meta: dict[str, Any], carry: Carry) -> OriginClass:
    """Untrusted when tainted; otherwise the class of the turn it answers."""
    if carry.tainted or meta.get("turnTainted") is True:
        return "untrusted"
    if carry.last_user == "owner":
        return "agent"
    return "system" if carry.last_user == "system" else "untrusted"


def iter_exported(
    lines: Iterable[bytes],
    skipped: dict[str, int],
    carry: Carry | None = None,
    first_line_number: int = 1,
    erased: Callable[[str], bool] | None = None,
) -> Iterator[ExportedLine]:
    """Stream exported lines from raw lines; skipped lines are counted into `skipped` by kind;
    `erased` as in `export_line`."""
    state = carry if carry is not None else Carry()
    for number, raw in enumerate(lines, start=first_line_number):
        out = export_line(raw, number, state, erased=erased)
        if out is None:
            continue
        if isinstance(out, str):
            skipped[out] = skipped.get(out, 0) + 1
            continue
        yield out
