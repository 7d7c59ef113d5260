"""The sweep's fast paths give the answers of the slow ones: the cached listing of an idle
agent, the stamp-only "unchanged" decision, the chunk-splitting line reader and the one-regex
session id check."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.ids import session_id_problem
from memoryd.ingest.plan import ScanAction, is_unchanged, plan_scan
from memoryd.sessions import json_store, lines
from memoryd.sessions.json_store import JsonSessionSource, ListingCache
from memoryd.sessions.model import Fingerprint, OversizedLine
from memoryd.store.checkpoints import Checkpoint, CheckpointStamp
from tests.builders import SessionStoreBuilder

# The process's kept listings, shared by the sources of one test (as the worker's are by its jobs).
LISTINGS = ListingCache()


@pytest.fixture(autouse=True)
def fresh_listings() -> None:
    LISTINGS.clear()


def _source(builder: SessionStoreBuilder) -> JsonSessionSource:
    return JsonSessionSource(builder.agent_id, builder.dir, LISTINGS)


def test_an_idle_agents_listing_is_kept_and_a_changed_sessions_json_is_read_again(
    store_builder: SessionStoreBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_store, "LISTING_SETTLED_NS", 0)  # the files here are seconds old at most
    store_builder.add("agent:main:one", "s-one")
    first = _source(store_builder).list_sessions()
    second = _source(store_builder).list_sessions()  # unchanged since the first: now kept
    assert second == first and second is not first
    assert _source(store_builder).list_sessions() is second  # served without a parse
    store_builder.add("agent:main:two", "s-two")
    changed = _source(store_builder).list_sessions()
    assert sorted(s.session_id for s in changed.sessions) == ["s-one", "s-two"]


def test_sources_without_the_process_cache_keep_no_listing_between_them(
    store_builder: SessionStoreBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot command's source gets a cache of its own: nothing is kept past it."""
    monkeypatch.setattr(json_store, "LISTING_SETTLED_NS", 0)
    store_builder.add("agent:main:one", "s-one")
    listings = [
        JsonSessionSource(store_builder.agent_id, store_builder.dir).list_sessions() for _ in range(3)
    ]
    assert listings[0] == listings[2] and listings[1] is not listings[2]
    assert len(LISTINGS) == 0
    kept = JsonSessionSource(store_builder.agent_id, store_builder.dir, LISTINGS)
    kept.list_sessions()
    kept.list_sessions()
    assert len(LISTINGS) == 1  # visible: the listing the process now keeps


def test_a_sessions_json_changed_just_before_it_was_read_is_never_served_from_memory(
    store_builder: SessionStoreBuilder,
) -> None:
    # Same size, same inode, within one coarse file-time tick: only a fresh parse can tell.
    store_builder.add("agent:main:one", "s-aaa")
    for _ in range(3):
        _source(store_builder).list_sessions()
    path = store_builder.dir / "sessions.json"
    path.write_text(path.read_text().replace("s-aaa", "s-bbb"))
    assert [s.session_id for s in _source(store_builder).list_sessions().sessions] == ["s-bbb"]


def test_a_removed_sessions_json_lists_nothing(
    store_builder: SessionStoreBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_store, "LISTING_SETTLED_NS", 0)
    store_builder.add("agent:main:one", "s-one")
    for _ in range(3):
        assert len(_source(store_builder).list_sessions().sessions) == 1
    (store_builder.dir / "sessions.json").unlink()
    assert _source(store_builder).list_sessions().sessions == ()


def test_participant_namespaces_given_as_json_strings_parse_like_objects(tmp_path: Path) -> None:
    entry = {
        "sessionId": "s",
        "participants": [
            {"actorId": "a", "namespace": json.dumps({"type": "remote", "id": "x", "domain": "d", "n": [1]})},
            {"actorId": "b", "namespace": {"type": "remote", "id": "x", "domain": "d", "n": [1]}},
            {"actorId": "c", "namespace": "not json"},
            {"actorId": "d", "namespace": "3"},
            {"actorId": "e", "namespace": '"remote"'},
            {"actorId": "f", "namespace": None},
        ],
    }
    info = json_store.session_from_entry("main", "k", entry, tmp_path / "s.jsonl")
    assert [(p.actor_id, p.namespace) for p in info.participants] == [
        ("a", (("domain", "d"), ("type", "remote"))),
        ("b", (("domain", "d"), ("type", "remote"))),
        ("c", (("type", "not json"),)),
        ("d", (("type", "profile"),)),
        ("e", (("type", "profile"),)),
        ("f", (("type", "profile"),)),
    ]
    assert info.locator == str(tmp_path / "s.jsonl")


_stamps = st.builds(
    CheckpointStamp,
    st.sampled_from([100, 101]),
    st.sampled_from([500, 501]),
    st.sampled_from([0, 1]),
    st.sampled_from(["", "abc"]),
    st.sampled_from([None, "", "channel:x"]),
)


@given(_stamps, st.none() | st.builds(Fingerprint, st.sampled_from([100, 101]), st.sampled_from([500, 501])))
def test_the_stamp_says_unchanged_exactly_when_the_full_plan_does(
    stamp: CheckpointStamp, fp: Fingerprint | None
) -> None:
    full = Checkpoint(
        "k",
        "main",
        "s",
        "key",
        "sessions/main/s",
        stamp.mtime_ms,
        stamp.size,
        stamp.content_hash,
        7,
        5,
        bool(stamp.at_end),
        "",
        stamp.excluded_reason,
        1,
    )
    assert is_unchanged(stamp, fp) == (plan_scan(full, fp).action is ScanAction.UNCHANGED)
    assert is_unchanged(full, fp) == is_unchanged(stamp, fp)
    assert not is_unchanged(None, fp)


def _reference_lines(data: bytes, cap: int) -> list[tuple[str, object]]:
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [("oversized", len(p)) if len(p) > cap else ("line", p) for p in pieces]


@given(
    st.lists(st.sampled_from([b"\n", b"a", b"bc", b"\r", b"x" * 9]), max_size=40),
    st.sampled_from([1, 2, 3, 7, 64]),
    st.sampled_from([0, 2, 5, 100]),
)
def test_lines_split_across_reads_come_out_whole(parts: list[bytes], chunk: int, cap: int) -> None:
    data = b"".join(parts)
    original = lines.READ_CHUNK_BYTES
    lines.READ_CHUNK_BYTES = chunk  # small reads put line ends on every possible boundary
    try:
        got = [
            ("oversized", x.size) if isinstance(x, OversizedLine) else ("line", bytes(x))
            for x in lines.iter_lines(io.BytesIO(data), max_line_bytes=cap)
        ]
    finally:
        lines.READ_CHUNK_BYTES = original
    assert got == _reference_lines(data, cap)


def _reference_problem(sid: object) -> str | None:
    if not isinstance(sid, str) or not sid:
        return "must be a non-empty string"
    if len(sid) > 512:
        return "longer than 512 characters"
    if "/" in sid or "\\" in sid:
        return "contains a path separator"
    if sid in (".", "..") or ".." in sid:
        return "contains '..'"
    if any(ord(c) < 32 for c in sid):
        return "contains a control character"
    if any("\ud800" <= c <= "\udfff" for c in sid):
        return "contains a lone surrogate (not valid UTF-8)"
    return None


@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "Z",
                "0",
                "-",
                ".",
                "/",
                "\\",
                "\x00",
                "\x1f",
                "\n",
                " ",
                "\x7f",
                "\ud800",
                "\udfff",
                "\ue000",
                "é",
                "😀",
            ]
        ),
        max_size=8,
    ).map("".join)
)
def test_session_id_check_names_the_same_problem_as_the_plain_checks(sid: str) -> None:
    assert session_id_problem(sid) == _reference_problem(sid)


@pytest.mark.parametrize(
    "sid", [".", "..", "a..b", "x" * 513, "a/b", "a\\b", "a\x01", "a\ud800", 3, None, ""]
)
def test_known_bad_session_ids_are_refused(sid: object) -> None:
    assert session_id_problem(sid) is not None and session_id_problem(sid) == _reference_problem(sid)
