"""The OpenClaw agent database as a session source: what it reads, that it reads it without
writing anything, and that it reads consistently while OpenClaw writes."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from memoryd.errors import SourceChanged
from memoryd.sessions.model import OversizedLine, SessionInfo
from memoryd.sessions.openclaw_store import OpenClawSessionSource
from memoryd.sessions.transcript import SKIP_MALFORMED, SKIP_OVERSIZED, iter_exported
from memoryd.store.db import sqlite3
from tests.builders import Msg
from tests.openclaw_fixture import (
    HOUR_MS,
    OBSERVATION_DISCORD,
    OBSERVATION_TELEGRAM,
    OpenClawDbBuilder,
    navigation_json,
    populate,
    sid,
)


@pytest.fixture
def built(tmp_path: Path) -> tuple[OpenClawDbBuilder, dict[str, Any]]:
    """The populated agent database, at rest (OpenClaw not running)."""
    builder = OpenClawDbBuilder(tmp_path / "openclaw")
    scenario = populate(builder)
    builder.close()
    return builder, scenario


def source(builder: OpenClawDbBuilder, **kw: Any) -> OpenClawSessionSource:
    return OpenClawSessionSource(builder.agent_id, builder.path, **kw)


def by_id(src: OpenClawSessionSource) -> dict[str, SessionInfo]:
    return {s.session_id: s for s in src.list_sessions().sessions}


def read_events(src: OpenClawSessionSource, session: Any) -> list[dict[str, Any]]:
    with src.open_transcript(session) as lines:
        return [json.loads(line) for line in lines]


def dir_state(path: Path) -> dict[str, tuple[str, int]]:
    """Every file beside the database: name -> (sha256, mtime_ns)."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(path.iterdir())
    }


def read_everything(src: OpenClawSessionSource) -> None:
    listing = src.list_sessions()
    for s in listing.sessions:
        src.fingerprint(s)
        with src.open_transcript(s) as lines:
            list(lines)
    for a in src.list_archives():
        with src.open_transcript(a) as lines:
            list(lines)


# -- metadata ----------------------------------------------------------------------------------


def test_lists_every_live_window_and_not_the_deleted_session(built):
    builder, _ = built
    listing = source(builder).list_sessions()
    ids = [s.session_id for s in listing.sessions]
    expected = [
        sid(n) for n in (1, 0xD, 5, 6, 7, 8, 9, 0xA, 0xB, 0xC, 0xE, 0x10, 0x17, 0x11, 0x12, 0x13, 0x14, 0x15)
    ]
    assert ids == expected  # ordered by created_at, then id
    assert sid(0x16) not in ids
    assert listing.errors == ()
    assert source(builder).kind == "openclaw"


def test_window_metadata_comes_from_the_window_row_and_the_entry(built):
    builder, _ = built
    src = source(builder)
    group = by_id(src)[sid(0xD)]
    assert group.session_key == "agent:main:telegram:group:-100555"
    assert (group.chat_type, group.channel, group.account_id) == ("group", "telegram", "default")
    assert group.created_at == builder.base_ms + HOUR_MS  # the window's created_at = sessionStartedAt
    assert group.updated_at == builder.base_ms + HOUR_MS + 600_000
    assert group.session_kind == "interactive" and group.hook_source is None
    assert group.locator == sid(0xD) and src.transcript_location(group) is None
    assert group.session_path == f"sessions/main/{sid(0xD)}"
    gmail = by_id(src)[sid(5)]
    assert (gmail.chat_type, gmail.channel, gmail.account_id) == (None, None, None)  # internal delivery


def test_participant_identity_is_the_namespace_json_plus_the_actor_id(built):
    builder, _ = built
    group = by_id(source(builder))[sid(0xD)]
    identities = sorted(json.dumps(p.identity(), sort_keys=True) for p in group.participants)
    expected = sorted(
        json.dumps(x, sort_keys=True)
        for x in [
            {**OBSERVATION_TELEGRAM, "id": "tg:1001"},
            {**OBSERVATION_TELEGRAM, "id": "tg:2002"},
            {**OBSERVATION_DISCORD, "id": "tg:2002"},  # the same raw id in another namespace
            {"type": "profile", "id": "alice"},
        ]
    )
    assert identities == expected
    assert by_id(source(builder))[sid(1)].participants[0].identity() == {"type": "profile", "id": "owner"}


def test_every_window_of_a_key_carries_the_key_participants(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    key = b.key("telegram:group:-1")
    b.session(key, "w1", [Msg("user", "first window")], participants=((OBSERVATION_TELEGRAM, "tg:9"),))
    b.upsert_entry(key, b.entry("w2", b.base_ms + 1), reason="reset", previous_session_id="w1")
    b.close()
    sessions = by_id(source(b))
    assert [p.actor_id for p in sessions["w1"].participants] == ["tg:9"]
    assert [p.actor_id for p in sessions["w2"].participants] == ["tg:9"]


@pytest.mark.parametrize(
    ("n", "expected", "why"),
    [
        (5, "gmail", "current window: the entry's gmail"),
        (6, "email", "current window: the entry's email (persisted in the column as webhook)"),
        (7, "webhook", "current window: the entry's webhook"),
        (8, "gmail", "older window of a reset key: column gmail with session_entry_provenance=1"),
        (9, "gmail", "the key's current window after the reset"),
        (0xA, None, "older window whose column is the coarse webhook (was email): never trusted"),
        (0xB, "email", "current window after the reset: the entry's email"),
        (0xC, None, "current window of an entry without a hook source, column empty"),
        (0xE, None, "column gmail but session_entry_provenance=0: not trusted"),
        (0x10, "gmail", "column gmail with session_entry_provenance=1"),
        (0x17, None, "column webhook with session_entry_provenance=1: still not trusted"),
        (1, None, "ordinary chat"),
    ],
)
def test_hook_source_follows_the_documented_selection_rule(built, n, expected, why):
    builder, _ = built
    assert by_id(source(builder))[sid(n)].hook_source == expected, why


@pytest.mark.parametrize(
    ("n", "kind", "narrative"),
    [
        (1, "interactive", False),
        (0x11, "cron", False),  # agent:main:cron:… (and createdVia cron)
        (0x12, "heartbeat", False),  # …:heartbeat
        (0x13, "subagent", False),  # agent:main:subagent:…
        (0x14, "subagent", False),  # spawnedBy on the entry / spawned_by column
        (0x15, "interactive", True),  # dreaming narrative: flagged, never ingested
    ],
)
def test_session_kind_comes_from_the_key_and_the_entry(built, n, kind, narrative):
    builder, _ = built
    s = by_id(source(builder))[sid(n)]
    assert (s.session_kind, s.generated_by_narrative) == (kind, narrative)


def test_cron_kind_from_the_created_via_column_alone(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.session(b.key("digest"), "c1", [Msg("user", "digest")])
    b.conn.execute("UPDATE session_nodes SET created_via = 'cron'")
    b.close()
    assert by_id(source(b))["c1"].session_kind == "cron"


def test_bad_rows_are_reported_in_one_line_and_the_rest_is_read(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.session(b.key("ok"), "good", [Msg("user", "fine")])
    b.session(
        b.key("broken"),
        "kept",
        [Msg("user", "entry json damaged")],
        participants=((OBSERVATION_TELEGRAM, "tg:5"),),
    )
    b.conn.execute(
        "UPDATE session_nodes SET entry_json = '{not json' WHERE session_key = ?", (b.key("broken"),)
    )
    b.conn.execute("UPDATE session_participants SET identity_namespace = '[oops'")
    b.upsert_entry(b.key("badid"), b.entry("../escape", b.base_ms))
    b.close()
    listing = source(b).list_sessions()
    assert sorted(s.session_id for s in listing.sessions) == ["good", "kept"]
    kept = next(s for s in listing.sessions if s.session_id == "kept")
    assert [p.identity() for p in kept.participants] == [{"id": "tg:5"}]  # still selectable by id
    assert len(listing.errors) == 3
    assert all(str(b.path) in e and "\n" not in e for e in listing.errors)
    assert any("'../escape'" in e and "skipped" in e for e in listing.errors)
    assert any("entry_json is not valid JSON" in e for e in listing.errors)
    assert any("identity_namespace is not valid JSON" in e for e in listing.errors)


def test_listing_and_archives_read_no_transcript_event(built):
    builder, _ = built
    statements: list[str] = []
    src = source(builder, trace=statements.append)
    src.list_sessions()
    src.list_archives()
    assert statements and not any("transcript_events" in s for s in statements)


# -- transcripts -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 0xD, 5])  # 5 is stored zstd-compressed
def test_transcript_yields_each_event_in_seq_order(built, n):
    builder, scenario = built
    src = source(builder)
    events = read_events(src, by_id(src)[sid(n)])
    assert events == scenario["events"][sid(n)]
    assert events[0] == {**events[0], "type": "session", "version": 4, "id": sid(n)}
    chain = [e["parentId"] for e in events[2:]]
    assert chain == [e["id"] for e in events[1:-1]]


def test_events_follow_seq_not_storage_order_in_either_encoding(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.upsert_entry(b.key("x"), b.entry("mixed", b.base_ms))
    texts = [json.dumps({"type": "message", "id": f"m{i}", "n": i}) for i in range(6)]
    for seq in (4, 1, 5, 0, 3, 2):
        b.insert_events("mixed", seq, [texts[seq]], zstd=seq % 2 == 1)
    b.close()
    src = source(b)
    assert [e["n"] for e in read_events(src, by_id(src)["mixed"])] == [0, 1, 2, 3, 4, 5]


def test_transcripts_longer_than_one_chunk_are_read_whole(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.session(b.key("long"), "long", [Msg("user", f"line {i}") for i in range(300)], zstd=True)
    b.close()
    src = source(b)
    events = read_events(src, by_id(src)["long"])
    assert len(events) == 301 and events[-1]["message"]["content"][0]["text"] == "line 299"


def test_an_oversized_event_is_an_oversized_line_and_reading_goes_on(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.upsert_entry(b.key("big"), b.entry("big", b.base_ms))
    huge = json.dumps({"type": "message", "blob": "x" * (4 * 1024 * 1024)})
    b.insert_events(
        "big",
        0,
        [
            json.dumps({"type": "session", "version": 4, "id": "big"}),
            huge,
            json.dumps({"type": "message", "id": "after"}),
        ],
    )
    b.close()
    src = source(b)
    with src.open_transcript(by_id(src)["big"]) as lines:
        out = list(lines)
    assert isinstance(out[1], OversizedLine) and out[1].size == len(huge)
    assert json.loads(out[2])["id"] == "after"
    skipped: dict[str, int] = {}
    list(iter_exported(out, skipped))
    assert skipped.get(SKIP_OVERSIZED) == 1


def test_an_undecodable_zstd_event_is_counted_as_malformed_and_reading_goes_on(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.session(b.key("z"), "z", [Msg("user", "before the damaged event")], zstd=True)
    b.conn.execute(
        "INSERT INTO transcript_events(session_id, seq, event_json, created_at, event_zstd, "
        "event_utf8_bytes, navigation_json) VALUES ('z', 2, NULL, 0, ?, 40, ?)",
        (b"\x28\xb5\x2f\xfd garbage", navigation_json(40)),
    )
    b.insert_events(
        "z",
        3,
        [
            json.dumps(
                {
                    "type": "message",
                    "id": "after",
                    "parentId": None,
                    "message": {
                        "role": "user",
                        "content": "after the damaged event",
                        "__openclaw": {"senderIsOwner": True},
                    },
                }
            )
        ],
        zstd=True,
    )
    b.close()
    src = source(b)
    with src.open_transcript(by_id(src)["z"]) as lines:
        out = list(lines)
    assert len(out) == 4
    skipped: dict[str, int] = {}
    exported = [x.text for x in iter_exported(out, skipped)]
    assert skipped == {SKIP_MALFORMED: 1}
    assert exported == ["User: before the damaged event", "User: after the damaged event"]


def test_line_provenance_is_classified_as_openclaw_does(built):
    builder, _ = built
    src = source(builder)
    sessions = by_id(src)
    skipped: dict[str, int] = {}
    with src.open_transcript(sessions[sid(1)]) as lines:
        direct = [x.origin_class for x in iter_exported(lines, skipped)]
    # owner turn, agent reply, (network tool result not exported), tainted reply, internal system line
    assert direct == ["owner", "agent", "untrusted", "system"]
    with src.open_transcript(sessions[sid(0xD)]) as lines:
        group = [x.origin_class for x in iter_exported(lines, skipped)]
    # owner tg:1001, non-owner tg:2002, assistant answering the non-owner turn
    assert group == ["owner", "untrusted", "untrusted"]


def test_archives_are_listed_with_reason_time_key_and_name(built):
    builder, _ = built
    archives = source(builder).list_archives()
    got = [(a.session_id, a.session_key, a.reason, a.created_at, a.name.endswith(".zst")) for a in archives]
    assert got == [
        (sid(8), "agent:main:hook:gmail:msg-20b1", "reset", builder.base_ms + 6 * HOUR_MS, False),
        (sid(0x16), "agent:main:discord:channel:c0proj", "deleted", builder.base_ms + 16 * HOUR_MS, True),
    ]
    assert archives[0].name.startswith(f"{sid(8)}.jsonl.reset.")


def test_archive_transcripts_are_read_in_identity_and_zstd_encodings(built):
    builder, scenario = built
    src = source(builder)
    archives = {a.session_id: a for a in src.list_archives()}
    assert read_events(src, archives[sid(8)]) == scenario["events"][sid(8)]  # identity
    assert read_events(src, archives[sid(0x16)]) == scenario["events"][sid(0x16)]  # zstd


def test_fingerprint_follows_the_transcript_revision_and_size(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    events = b.session(b.key("fp"), "fp", [Msg("user", "one"), Msg("assistant", "two")])
    b.add_window(b.key("fp"), "empty", created_at=b.base_ms)
    src = source(b)
    session = by_id(src)["fp"]
    first = src.fingerprint(session)
    assert first is not None
    assert first.size == sum(len(json.dumps(e, separators=(",", ":")).encode()) + 1 for e in events)
    revision = b.conn.execute(
        "SELECT transcript_updated_at FROM session_windows WHERE session_id='fp'"
    ).fetchone()[0]
    assert first.mtime_ms == revision
    assert src.fingerprint(session) == first  # unchanged transcript, same fingerprint
    time.sleep(0.002)
    b.append("fp", [Msg("user", "three")], zstd=True)
    second = src.fingerprint(session)
    assert second is not None and second.size > first.size and second.mtime_ms > first.mtime_ms
    assert src.fingerprint(by_id(src)["empty"]) is None  # a window without events has no transcript
    b.close()


# -- read-only ---------------------------------------------------------------------------------


def test_reading_a_database_at_rest_changes_no_byte_and_creates_no_file(built):
    builder, _ = built
    before = dir_state(builder.path.parent)
    dir_mtime = builder.path.parent.stat().st_mtime_ns
    assert list(before) == ["openclaw-agent.sqlite"]
    read_everything(source(builder))
    assert dir_state(builder.path.parent) == before
    assert builder.path.parent.stat().st_mtime_ns == dir_mtime


def test_reading_while_openclaw_has_it_open_creates_no_file_and_writes_no_database_byte(built):
    builder, _ = built
    builder.open()
    builder.append(sid(1), [Msg("user", "OpenClaw is running and has just appended this.")])
    before = dir_state(builder.path.parent)
    assert set(before) == {"openclaw-agent.sqlite", "openclaw-agent.sqlite-wal", "openclaw-agent.sqlite-shm"}
    read_everything(source(builder))
    after = dir_state(builder.path.parent)
    assert set(after) == set(before)
    # -shm is shared memory every WAL reader takes read marks in; the database and WAL are not touched.
    for name in ("openclaw-agent.sqlite", "openclaw-agent.sqlite-wal"):
        assert after[name] == before[name], name
    builder.close()


def test_a_leftover_wal_without_shared_memory_is_read_without_creating_it(built):
    builder, _ = built
    Path(f"{builder.path}-wal").write_bytes(b"")  # left by a crash: no -shm beside it
    before = dir_state(builder.path.parent)
    read_everything(source(builder))
    assert dir_state(builder.path.parent) == before


def test_the_connection_is_read_only_and_query_only(built):
    builder, _ = built
    statements: list[str] = []
    src = source(builder, trace=statements.append)
    src.list_sessions()
    assert "PRAGMA query_only = ON" in statements
    assert not any(
        s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "REPLACE"))
        for s in statements
    )


# -- concurrent writer ---------------------------------------------------------------------------


def test_a_transcript_is_read_from_one_snapshot_while_openclaw_appends(tmp_path):
    b = OpenClawDbBuilder(tmp_path)  # stays open: OpenClaw is running (WAL)
    b.session(b.key("live"), "live", [Msg("user", f"message {i}") for i in range(150)])
    src = source(b)
    session = by_id(src)["live"]
    with src.open_transcript(session) as lines:
        first = next(lines)
        b.append("live", [Msg("user", f"late {i}") for i in range(100)])  # committed mid-read
        rest = list(lines)
    assert json.loads(first)["type"] == "session"
    assert len(rest) == 150  # the snapshot the read began with: none of the 100 late events
    assert len(read_events(src, session)) == 251  # the next read sees them
    b.close()


def test_reads_stay_whole_while_another_connection_keeps_appending(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.session(b.key("busy"), "busy", [Msg("user", "first")])
    writer = sqlite3.connect(str(b.path), isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA busy_timeout = 10000")
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            i = 0
            while not stop.is_set():
                b.append(
                    "busy", [Msg("user", f"burst {i}.{j}") for j in range(5)], zstd=i % 2 == 1, conn=writer
                )
                i += 1
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    src = source(b)
    lengths = []
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            session = by_id(src)["busy"]
            assert src.fingerprint(session) is not None
            events = read_events(src, session)
            # Every read is a whole transaction's worth: header, then an unbroken parent chain.
            assert events[0]["type"] == "session" and (len(events) - 2) % 5 == 0
            assert [e["parentId"] for e in events[2:]] == [e["id"] for e in events[1:-1]]
            lengths.append(len(events))
    finally:
        stop.set()
        thread.join()
        writer.close()
        b.close()
    assert not errors
    assert lengths == sorted(lengths) and lengths[-1] > lengths[0]


def test_a_checkpoint_during_a_read_at_rest_is_detected_not_read_torn(built):
    builder, _ = built
    builder.open()
    builder.session(builder.key("long"), "long", [Msg("user", f"message {i}") for i in range(200)])
    builder.close()  # at rest again: the source reads without shared memory
    src = source(builder)
    session = by_id(src)["long"]
    with pytest.raises(SourceChanged, match="'long'.*read again"), src.open_transcript(session) as lines:
        next(lines)  # the first chunk is read and checked
        builder.open()  # OpenClaw starts, writes and checkpoints into the main file
        builder.append("long", [Msg("user", "x" * 2000) for _ in range(50)])
        builder.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        builder.close()
        list(lines)


def test_a_listing_that_overlaps_a_checkpoint_is_read_again(built):
    builder, _ = built
    selects: list[str] = []
    state = {"done": False}

    def trace(sql: str) -> None:
        if "FROM session_windows" in sql:
            selects.append(sql)
            if not state["done"]:  # OpenClaw writes and checkpoints as the first listing starts
                state["done"] = True
                builder.open()
                builder.session(builder.key("new"), "new-during-listing", [Msg("user", "hello")])
                builder.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                builder.close()

    listing = source(builder, trace=trace).list_sessions()
    assert len(selects) == 2  # the change was noticed and the listing read again
    assert "new-during-listing" in {s.session_id for s in listing.sessions}


def test_zstd_events_decode_to_the_exact_stored_bytes(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.upsert_entry(b.key("bytes"), b.entry("bytes", b.base_ms))
    text = '{"type":"message","id":"u","message":{"role":"user","content":"caf\u00e9 \u2603"}}'
    b.insert_events("bytes", 0, [text], zstd=True)
    stored = b.conn.execute("SELECT event_zstd FROM transcript_events").fetchone()[0]
    b.close()
    assert zstandard.decompress(stored) == text.encode()
    src = source(b)
    with src.open_transcript(by_id(src)["bytes"]) as lines:
        assert list(lines) == [text.encode()]


def test_fingerprints_of_many_sessions_are_one_read_transaction_equal_to_each_fingerprint(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    for i in range(80):
        b.session(b.key(f"fps{i}"), f"fps{i}", [Msg("user", f"turn {i}"), Msg("assistant", "ok " * i)])
    b.add_window(b.key("fps0"), "empty", created_at=b.base_ms)
    b.append("fps3", [Msg("user", "packed")], zstd=True)
    statements: list[str] = []
    src = source(b, trace=statements.append)
    sessions = src.list_sessions().sessions
    each = {s.session_id: fp for s in sessions if (fp := src.fingerprint(s)) is not None}
    for subset in (sessions, sessions[:3]):
        statements.clear()
        got = src.fingerprints(subset)
        assert got == {s.session_id: each[s.session_id] for s in subset if s.session_id in each}
        assert statements.count("BEGIN") == 1  # one snapshot, however many sessions
    assert "empty" not in src.fingerprints(sessions)
    b.close()


def test_metadata_that_is_not_utf8_is_listed_with_replacement_characters(tmp_path):
    b = OpenClawDbBuilder(tmp_path)
    b.session(
        b.key("telegram:group:g1"),
        "g1",
        [Msg("user", "hello")],
        participants=((OBSERVATION_TELEGRAM, "tg:1"),),
    )
    b.session(b.key("telegram:group:g2"), "g2", [Msg("user", "hello")])
    b.conn.execute("UPDATE session_windows SET channel = CAST(x'74ff67' AS TEXT) WHERE session_id = 'g1'")
    b.conn.execute("UPDATE session_participants SET actor_id = CAST(x'74673aff' AS TEXT)")
    listing = source(b).list_sessions()
    got = {s.session_id: s for s in listing.sessions}
    assert got["g1"].channel == "t\ufffdg" and got["g2"].channel is None
    assert [p.actor_id for p in got["g1"].participants] == ["tg:\ufffd"]
    b.close()
