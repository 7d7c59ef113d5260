"""Scanning one admitted transcript from its checkpoint (reference §5.2), streaming.

A `TranscriptScanner` keeps the transcript open and hands out candidates a batch at a time,
so a sweep can commit what it has (under the lock) and carry on reading where it stopped,
never holding a whole transcript in memory.

The checkpoint cursor is "the first N transcript lines, whose bytes hash to H": after an
append the scanner re-hashes those N lines (a read, no parsing) and continues after them;
if they no longer hash to H the transcript was rewritten and it starts again from line 1
(seen hashes keep already staged messages from being staged twice).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from memoryd import derivations
from memoryd.constants import SNIPPET_MAX_CHARS, SNIPPET_MIN_CHARS
from memoryd.errors import OperationFailed
from memoryd.ingest.plan import ScanAction, ScanPlan
from memoryd.sessions.files import last_byte
from memoryd.sessions.model import Fingerprint, OversizedLine, SessionInfo, SessionSource
from memoryd.sessions.transcript import SKIP_INVALID_UTF8, SKIP_MALFORMED, Carry, export_line
from memoryd.utf16 import truncate_utf16, utf16_len

_DAY_BUCKET_MS = 900_000  # every zone's UTC offset is a multiple of 15 minutes


class Candidate(NamedTuple):
    """One message to stage: its corpus snippet, provenance and dedupe hash.

    A NamedTuple rather than a frozen dataclass: a first sweep makes one per message, and a
    tuple is built several times faster (equally immutable)."""

    session_id: str
    session_key: str | None
    line_number: int  # transcript line
    snippet: str
    origin_class: str
    observed_at: int  # Unix ms: the message time, else the transcript's mtime
    day: str  # YYYY-MM-DD of observed_at in the dreaming time zone
    seen_hash: str


@dataclass(frozen=True, slots=True)
class Cursor:
    line_count: int
    content_hash: str
    produced: int
    carry: str
    at_end: bool


def seen_hash(scope: str, timestamp_ms: int, line_number: int, snippet: str) -> str:
    """The reference's message hash: sha1 of scope, basis (time, else line) and snippet."""
    basis = f"ts:{timestamp_ms}" if timestamp_ms > 0 else f"line:{line_number}"
    return derivations.seen_hash(scope, basis, snippet)


class DayOf:
    """Unix ms -> YYYY-MM-DD in a zone, cached per 15-minute bucket (a sweep converts millions)."""

    def __init__(self, zone: str):
        self.zone = ZoneInfo(zone)
        self._cache: dict[int, str] = {}

    def __call__(self, ms: int) -> str:
        bucket = ms // _DAY_BUCKET_MS
        day = self._cache.get(bucket)
        if day is None:
            day = datetime.fromtimestamp(bucket * _DAY_BUCKET_MS / 1000, self.zone).strftime("%Y-%m-%d")
            self._cache[bucket] = day
        return day


class TranscriptScanner:
    """Streams one transcript from a ScanPlan; `take(n)` returns up to n new candidates."""

    def __init__(
        self,
        source: SessionSource,
        session: SessionInfo,
        plan: ScanPlan,
        fingerprint: Fingerprint,
        scope: str,
        seen: set[str],
        day_of: Callable[[int], str],
        skipped: dict[str, int],
        erased: Callable[[str], bool] | None = None,
    ):
        self.source = source
        self.erased = erased  # senders an erasure removed from this shared session
        self.session = session
        self.plan = plan
        self.fingerprint = fingerprint
        self.scope = scope
        self.seen = seen
        self.day_of = day_of
        self.skipped = skipped
        self.rewritten = False  # a resume found the consumed prefix changed
        self.finished = False
        self._stack = ExitStack()
        self._lines: Iterator[bytes] = iter(())
        self._peeked: bytes | None = None
        self._hash = derivations.transcript_hasher()
        self._unhashed: list[bytes] = []
        self.line_count = 0
        self.produced = 0
        self.carry = Carry()
        self.at_end = False
        # Per-message senders seen since the last `take_senders` (actor id -> senderIdentity):
        # recorded as the session's participants, so an erasure finds a group chat's members.
        self.senders: dict[str, Any] = {}

    # -- opening -------------------------------------------------------------------------------

    def open(self) -> None:
        location = self.source.transcript_location(self.session)
        if location is not None:
            try:
                st = os.stat(location, follow_symlinks=False)
            except FileNotFoundError:
                raise OperationFailed(f"{location}: transcript disappeared before it could be read") from None
            if not stat.S_ISREG(st.st_mode):
                raise OperationFailed(f"{location}: transcript is not a regular file; not read")
        self._start()
        if self.plan.action is ScanAction.RESUME and not self._skip_verified_prefix():
            self.rewritten = True
            self._stack.close()
            self._stack = ExitStack()
            self._hash = derivations.transcript_hasher()
            self.line_count = 0
            self._start()

    def _start(self) -> None:
        self._lines = iter(self._stack.enter_context(self.source.open_transcript(self.session)))
        self._peeked = None

    def _skip_verified_prefix(self) -> bool:
        want = self.plan.start_line
        got = 0
        while got < want:
            raw = next(self._lines, None)
            if raw is None:
                return False  # fewer lines than were consumed: rewritten
            self._unhashed.append(_hashable(raw))
            got += 1
            if len(self._unhashed) >= 4096:
                self._flush_hash()
        self._flush_hash()
        if self._hash.hexdigest() != self.plan.expected_hash:
            return False
        self.line_count = want
        self.produced = self.plan.produced
        self.carry = Carry.decode(self.plan.carry)
        return True

    def close(self) -> None:
        self._stack.close()

    # -- reading -------------------------------------------------------------------------------

    def _next_line(self) -> bytes | None:
        if self._peeked is not None:
            raw, self._peeked = self._peeked, None
            return raw
        return next(self._lines, None)

    def _is_unfinished_last_line(self) -> bool:
        """A bad last line without its newline may still be being written: leave it for later."""
        if self._peeked is None:
            self._peeked = next(self._lines, None)
        if self._peeked is not None:
            return False
        location = self.source.transcript_location(self.session)
        if location is None:
            return False
        # Never a plain open(): the transcript may have been swapped for a FIFO (or a symlink).
        last = last_byte(location)
        return last is not None and last != b"\n"

    def take(self, limit: int) -> list[Candidate]:
        out: list[Candidate] = []
        if self.finished:
            return out
        scope = self.scope
        seen = self.seen
        session = self.session
        sid, skey = session.session_id, session.session_key
        mtime = self.fingerprint.mtime_ms
        unhashed = self._unhashed
        carry = self.carry
        day_of = self.day_of
        lines = self._lines
        digest_of = derivations.seen_hash
        number = self.line_count
        senders = self.senders
        while len(out) < limit:
            if self._peeked is None:
                raw = next(lines, None)
            else:
                raw, self._peeked = self._peeked, None
            if raw is None:
                self.finished = self.at_end = True
                break
            number += 1
            result = export_line(raw, number, carry, SNIPPET_MAX_CHARS, self.erased)
            if type(result) is str:
                if result in (SKIP_MALFORMED, SKIP_INVALID_UTF8) and self._is_unfinished_last_line():
                    self.finished = self.at_end = True
                    break
                self.skipped[result] = self.skipped.get(result, 0) + 1
            unhashed.append(raw if type(raw) is bytes else _hashable(raw))
            if len(unhashed) >= 1024 or len(raw) > 65536:
                self._flush_hash()  # bounds what a batch of huge tool results keeps alive
            self.line_count = number
            if result is None or isinstance(result, str):
                continue
            if result.sender is not None and result.sender not in senders:
                senders[result.sender] = result.sender_identity
            self.produced += 1
            snippet = truncate_utf16(result.text, SNIPPET_MAX_CHARS)
            # utf16_len is never below len: only a short snippet needs the exact count.
            if len(snippet) < SNIPPET_MIN_CHARS and utf16_len(snippet) < SNIPPET_MIN_CHARS:
                continue
            ts = result.timestamp_ms
            # seen_hash(scope, ts, number, snippet), inline: one per message.
            basis = f"ts:{ts}" if ts > 0 else f"line:{number}"
            digest = digest_of(scope, basis, snippet)
            if digest in seen:
                continue
            seen.add(digest)
            observed = ts or mtime
            out.append(
                Candidate(sid, skey, number, snippet, result.origin_class, observed, day_of(observed), digest)
            )
        self._flush_hash()
        return out

    def take_senders(self) -> dict[str, Any]:
        """The senders seen since the last call (and forget them here)."""
        found, self.senders = self.senders, {}
        return found

    def _flush_hash(self) -> None:
        if self._unhashed:
            # One update per batch instead of two per line: same bytes, a fraction of the calls.
            self._hash.update(b"\n".join(self._unhashed))
            self._hash.update(b"\n")
            self._unhashed.clear()

    def cursor(self) -> Cursor:
        self._flush_hash()
        return Cursor(
            self.line_count, self._hash.hexdigest(), self.produced, self.carry.encode(), self.at_end
        )


def _hashable(raw: bytes) -> bytes:
    # An oversized line is never held in memory; its size stands in for its bytes in the hash.
    if isinstance(raw, OversizedLine):
        return b"\x00oversized:%d" % raw.size
    return raw
