"""The transcript scanner on real files: resuming from a cursor is the same as reading once."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.ingest.plan import ScanAction, plan_scan
from memoryd.ingest.scan import Candidate, DayOf, TranscriptScanner
from memoryd.sessions.json_store import JsonSessionSource
from memoryd.sessions.model import SessionInfo
from memoryd.store.checkpoints import Checkpoint
from memoryd.utf16 import truncate_utf16, utf16_key, utf16_len

ROLES = st.sampled_from(["owner", "stranger", "assistant", "network", "bad"])


def render(kind: str, i: int) -> bytes:
    if kind == "bad":
        return b'{"type":"message", oops'
    if kind == "network":
        body = {"role": "toolResult", "content": "result", "__openclaw": {"resultContentSource": "network"}}
    elif kind == "assistant":
        body = {"role": "assistant", "content": f"Answer number {i} with enough text."}
    else:
        body = {"role": "user", "content": f"Question number {i} with enough text."}
        if kind == "owner":
            body["__openclaw"] = {"senderIsOwner": True}
    return json.dumps({"type": "message", "message": {**body, "timestamp": 1_700_000_000_000 + i}}).encode()


def scan_all(
    source: JsonSessionSource, session: SessionInfo, previous: Checkpoint | None, seen: set[str], chunk: int
) -> tuple[list[Candidate], Checkpoint]:
    fp = source.fingerprint(session)
    assert fp is not None
    plan = plan_scan(previous, fp)
    if plan.action is ScanAction.UNCHANGED:
        assert previous is not None
        return [], previous
    scanner = TranscriptScanner(source, session, plan, fp, "main:s", seen, DayOf("UTC"), {})
    out: list[Candidate] = []
    scanner.open()
    try:
        while not scanner.finished:
            out += scanner.take(chunk)
    finally:
        scanner.close()
    cur = scanner.cursor()
    cp = Checkpoint(
        "main:sessions/main/s",
        "main",
        "s",
        None,
        "sessions/main/s",
        fp.mtime_ms,
        fp.size,
        cur.content_hash,
        cur.line_count,
        cur.produced,
        cur.at_end,
        cur.carry,
        None,
        0,
    )
    return out, cp


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(ROLES, min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    chunk=st.integers(1, 5),
    partial=st.booleans(),
)
def test_scanning_after_each_append_equals_one_scan_of_the_whole(
    kinds: list[str], cuts: list[int], chunk: int, partial: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = directory / "s.jsonl"
        session = SessionInfo("main", "s", None, "interactive", locator=str(path))
        source = JsonSessionSource("main", directory)
        lines = [render(k, i) for i, k in enumerate(kinds)]
        data = b"".join(line + b"\n" for line in lines)
        # Appends land at arbitrary byte offsets, including mid-line (a writer caught half way).
        offsets = sorted(
            {min(len(data), c * 7 if partial else sum(len(x) + 1 for x in lines[:c])) for c in cuts}
        )
        path.write_bytes(b"")
        staged: list[Candidate] = []
        previous: Checkpoint | None = None
        seen: set[str] = set()
        for end in [*offsets, len(data)]:
            with path.open("ab") as fh:
                fh.write(data[path.stat().st_size : end])
            os.utime(path, ns=(0, path.stat().st_mtime_ns + 1_000_000))
            found, previous = scan_all(source, session, previous, seen, chunk)
            staged += found
        once, _ = scan_all(source, session, None, set(), 1000)
        assert [(c.line_number, c.snippet, c.origin_class) for c in staged] == [
            (c.line_number, c.snippet, c.origin_class) for c in once
        ]


def test_a_rewritten_prefix_is_detected_and_rescanned(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionInfo("main", "s", None, "interactive", locator=str(path))
    source = JsonSessionSource("main", tmp_path)
    path.write_bytes(render("owner", 1) + b"\n" + render("assistant", 2) + b"\n")
    _, cp = scan_all(source, session, None, set(), 10)
    path.write_bytes(render("owner", 7) + b"\n" + render("assistant", 2) + b"\n" + render("owner", 3) + b"\n")
    fp = source.fingerprint(session)
    assert fp is not None
    plan = plan_scan(cp, fp)
    assert plan.action is ScanAction.RESUME  # it grew, so it looks like an append until the hash says no
    scanner = TranscriptScanner(source, session, plan, fp, "main:s", set(), DayOf("UTC"), {})
    scanner.open()
    found = scanner.take(100)
    scanner.close()
    assert scanner.rewritten and [c.line_number for c in found] == [1, 2, 3]


@given(st.text(max_size=400), st.integers(1, 300))
def test_truncation_counts_utf16_units_like_the_reference(text: str, limit: int) -> None:
    cut = truncate_utf16(text, limit)
    assert text.startswith(cut) and utf16_len(cut) <= limit
    assert cut == text or utf16_len(text[: len(cut) + 1]) > limit


def test_a_lone_surrogate_is_one_code_unit_in_lengths_and_order() -> None:
    """Node's JSON.stringify writes a string cut mid-pair as a lone surrogate; JavaScript counts
    it as one code unit and sorts by it, and so must every length and order of ours."""
    lone = "abc\ud83d"
    assert utf16_len(lone) == 4 and truncate_utf16(lone, 3) == "abc"
    assert utf16_key(lone) < utf16_key("abc\ud83d\ude00") < utf16_key("abd")
