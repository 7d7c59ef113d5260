"""Hostile `sessions.json` files and session directories: random bytes, deep JSON, huge numbers,
wrong types, path tricks in session ids, symlinked transcripts. The reader ends in a clear
OperationFailed naming the file, or a listing whose bad records are skipped with one error line
each; no session it lists can name a file outside the sessions directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.errors import OperationFailed
from memoryd.ids import session_source_problem
from memoryd.sessions.json_store import JsonSessionSource

EXAMPLES = 300
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

PATH_TRICKS = [
    "../escape",
    "..",
    ".",
    "a/b",
    "a\\b",
    "/etc/passwd",
    "x\x00y",
    "ok\nnewline",
    "",
    " ",
    "..hidden",
    "sess..ion",
    "\u202e",
    "ses\u2028sion",
    "x" * 600,
    "normal-id",
    "CON",
    "a.jsonl",
]
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(PATH_TRICKS)
)
json_values = st.one_of(
    json_scalar,
    st.lists(json_scalar, max_size=2),
    st.dictionaries(st.text(max_size=6), json_scalar, max_size=2),
)


@st.composite
def session_entries(draw):
    entry = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "sessionKind",
                    "chatType",
                    "channel",
                    "hookExternalContentSource",
                    "createdAt",
                    "updatedAt",
                    "participants",
                    "origin",
                    "delivery",
                    "spawnedBy",
                    "accountId",
                    "sessionStartedAt",
                ]
            ),
            json_values,
            max_size=4,
        )
    )
    if draw(st.booleans()):
        entry["sessionId"] = draw(st.one_of(st.sampled_from(PATH_TRICKS), json_scalar))
    if draw(st.booleans()):
        entry["participants"] = draw(
            st.lists(
                st.one_of(
                    json_values, st.fixed_dictionaries({"actorId": json_scalar, "namespace": json_values})
                ),
                max_size=3,
            )
        )
    return entry


stores = st.dictionaries(st.text(max_size=20), st.one_of(session_entries(), json_values), max_size=5)


def _source(tmp_path: Path) -> JsonSessionSource:
    d = tmp_path / "agents" / "main" / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    return JsonSessionSource("main", d)


def _check_listing(source: JsonSessionSource) -> None:
    listing = source.list_sessions()
    root = source.dir.resolve()
    for s in listing.sessions:
        assert session_source_problem(s.session_id) is None
        loc = Path(s.locator)
        assert loc.parent == source.dir and loc.resolve().parent == root  # one file, in the directory
        assert s.created_at is None or 0 <= s.created_at < 10**16
        hash(s)  # frozen values all the way down (participants are hashable)
    for line in listing.errors:
        assert "\n" not in line and str(source.store_path) in line


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.sampled_from(
            [
                b"[" * 2000,
                b"{" * 2000,
                b'{"a": 1e999}',
                b'{"k": "\\ud800"}',
                b"\xef\xbb\xbf{}",
                b"{}\x00",
                b"null",
                b"[]",
                b'"x"',
                b"\r\n{\r\n}\r\n",
            ]
        ),
    )
)
def test_random_bytes_as_sessions_json_fail_with_one_line_naming_the_file(tmp_path, data):
    source = _source(tmp_path)
    source.store_path.write_bytes(data)
    try:
        _check_listing(source)
    except OperationFailed as exc:
        assert str(source.store_path) in str(exc) and "\n" not in str(exc)
    source.list_archives()  # never raises, even when the store does not parse
    assert source.store_path.read_bytes() == data


@FUZZ
@given(store=stores)
def test_hostile_entries_are_listed_safely_or_skipped_with_a_reason(tmp_path, store):
    source = _source(tmp_path)
    source.store_path.write_text(json.dumps(store))
    _check_listing(source)
    listed = {s.session_id for s in source.list_sessions().sessions}
    valid = {
        e.get("sessionId")
        for e in store.values()
        if isinstance(e, dict) and session_source_problem(e.get("sessionId")) is None
    }
    assert listed == valid  # every valid record listed, every invalid one skipped


@FUZZ
@given(
    names=st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "x.jsonl.reset.2026-08-25T10-00-00.000Z",
                    "..jsonl.deleted.2026-08-25T10-00-00Z",
                    "a..b.jsonl.reset.2026-08-25T10-00-00Z.zst",
                    "y.jsonl.deleted.9999-99-99T99-99-99.999Z",
                    "p.checkpoint.abc.jsonl",
                    "z.jsonl.reset.2026-08-25T10-00-00.000Z.zst",
                ]
            ),
            st.text(
                alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
                min_size=1,
                max_size=40,
            ),
        ),
        max_size=6,
    )
)
def test_archive_names_never_yield_an_unsafe_session_id(tmp_path, names):
    source = _source(tmp_path)
    for name in names:
        if name in (".", ".."):
            continue
        try:
            (source.dir / name).write_bytes(b"")
        except OSError:
            continue  # a name the filesystem refuses (too long)
    for archive in source.list_archives():
        assert session_source_problem(archive.session_id) is None
        assert Path(archive.locator).parent == source.dir


def test_a_symlinked_transcript_is_neither_fingerprinted_nor_opened(tmp_path):
    source = _source(tmp_path)
    secret = tmp_path / "outside.jsonl"
    secret.write_text('{"type":"message","message":{"role":"user","content":"outside words here"}}\n')
    os.symlink(secret, source.dir / "linked.jsonl")
    source.store_path.write_text(json.dumps({"agent:main:x": {"sessionId": "linked"}}))
    (session,) = source.list_sessions().sessions
    assert source.fingerprint(session) is None
    with pytest.raises(OperationFailed, match="linked.jsonl"), source.open_transcript(session):
        pass
    assert secret.read_text().startswith('{"type"')


def test_a_directory_where_sessions_json_should_be_is_a_clear_error(tmp_path):
    source = _source(tmp_path)
    source.store_path.mkdir()
    with pytest.raises(OperationFailed, match="sessions.json"):
        source.list_sessions()
