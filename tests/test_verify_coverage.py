"""The verifier's coverage rule, proven by what it catches (retention/pieces.py): after a real
erasure, any piece of at least K characters of any erased message, in any form memoryd stores
it in, or any registered derivation of it (daemon/derivations.py), planted at any offset in any
place the verifier reads, makes it fail; with the plant
gone, the same erasure verifies clean, although a surviving session says some of the same
words."""

from __future__ import annotations

import sqlite3 as std_sqlite3
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memoryd import derivations
from memoryd.agent_runtime import agent_runtime
from memoryd.agents import agent_paths
from memoryd.constants import VERIFY_PIECE_CHARS
from memoryd.failpoints import ENV_VAR as FAILPOINTS_ENV
from memoryd.ingest.corpus import render_line
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.ops.verification import run_verify
from memoryd.retention import api
from memoryd.retention.api import EraseRequest
from memoryd.retention.needles import VerifySubject, compile_needles, derivation_inputs, subject_pieces
from memoryd.retention.pieces import PieceMatcher, message_forms, pieces, windows, without_shared
from memoryd.retention.settle import settle_waiting_receipts
from memoryd.retention.state import retention_db_path
from memoryd.settings import Settings
from memoryd.store.db import Store
from memoryd.store.migrate import RETENTION
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

K = VERIFY_PIECE_CHARS
USER = "tenant:default:user:nora"
# A long message (the audit's was 330 characters), one whose NFKC form differs, one shorter than K.
LONG = (
    "Remember that the quarterly audit of the Kestrel Road depot found three pallets of "
    "mislabelled solvent in bay nine, that Ingrid Solberg signed the corrective action on the "
    "fourteenth, and that the insurer wants the photographs of the damaged racking before the "
    "renewal meeting, which moved to the glass room on the fourth floor at half past two."
)
UNICODE = "Ｎｏｒａ's ﬁle: café crème at Ĳsselmeer, code 4471-ʙ"
SHORT = "pin 90210 ok"  # 12 characters: whole, not windows
OBJECT = "Nora's courier is Blue Finch Logistics, depot on Kestrel Road"
# A surviving session shares a few windows with the erased one ("the insurer wants …"):
# that must not make a clean erasure fail.
OMAR = "Also: the insurer wants the photographs by Monday, says the greenhouse team."
T0 = 1_790_000_000_000 + 41_000_777


@dataclass
class World:
    settings: Settings
    subject: VerifySubject

    @property
    def messages(self) -> list[str]:
        return [LONG, UNICODE, SHORT, OBJECT]

    async def sql(self, retention: bool, sql: str, *params: object) -> None:
        path = retention_db_path(self.settings) if retention else agent_paths(self.settings, "main").db_path
        store = await Store.open(path, schema=RETENTION) if retention else await Store.open(path)
        try:
            await store.write(lambda conn: conn.execute(sql, params), fence=None)
        finally:
            await store.close()


@pytest.fixture
async def world(tmp_path, sessions_root, unique, redis) -> World:
    s = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    builder = SessionStoreBuilder(sessions_root, "main")
    builder.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", LONG), Msg("assistant", "Noted."), Msg("user", UNICODE), Msg("user", SHORT)],
        participants=[{"actorId": "nora"}],
    )
    builder.add("agent:main:dm:omar", "sess-omar-1", [Msg("user", OMAR)], participants=[{"actorId": "omar"}])
    async with agent_runtime(s, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    await api.write_object(s, redis, USER, OBJECT, now=T0)
    await api.write_object(s, redis, "tenant:default:user:omar", "omar keeps bees", now=T0 + 5)
    request = EraseRequest(scope=USER)
    _, subject = await api.plan_erase(s, request)
    receipt = await erasure.run_erase(s, redis, request)
    assert receipt.verified, receipt.verification
    return World(s, subject)


# --- where a plant goes ---------------------------------------------------------------------------

Undo = Callable[[], Awaitable[None]]


async def _row(w: World, table: str, text: str) -> Undo:
    # (store, insert, delete): a real table of each store, and a table memoryd does not know.
    rows = {
        "short_term_entries": (
            False,
            "INSERT INTO short_term_entries(entry_key, path, start_line, end_line, snippet, "
            "first_recalled_at, last_recalled_at, origin_class, observed_at) "
            "VALUES ('k-plant', 'memory/x.txt', 1, 1, ?, 1, 1, 'owner', 1)",
            "DELETE FROM short_term_entries WHERE entry_key = 'k-plant'",
        ),
        "memory_index_chunks": (
            False,
            "INSERT INTO memory_index_chunks(id, path, start_line, end_line, hash, model, text, "
            "updated_at) VALUES ('c-plant', 'MEMORY.md', 1, 2, 'h', 'fts-only', ?, 1)",
            "DELETE FROM memory_index_chunks WHERE id = 'c-plant'",
        ),
        "memory_backups": (
            False,
            "INSERT INTO memory_backups(created_at, content, content_hash) VALUES (1, ?, 'h')",
            "DELETE FROM memory_backups",
        ),
        "retention_objects": (
            True,
            "INSERT INTO retention_objects(object_id, scope, content, content_hash, created_at) "
            "VALUES ('obj-plant', 'tenant:default:user:omar', ?, 'x', 1)",
            "DELETE FROM retention_objects WHERE object_id = 'obj-plant'",
        ),
        "a_new_table": (
            False,
            "INSERT INTO plant_kind(v) VALUES (?)",
            "DELETE FROM plant_kind",
        ),
    }
    retention, insert, delete = rows[table]
    if table == "a_new_table":
        await w.sql(False, "CREATE TABLE IF NOT EXISTS plant_kind(v BLOB)")
        await w.sql(False, insert, text.encode("utf-8"))  # a blob: bytes, not text
    else:
        await w.sql(retention, insert, text)
    return lambda: w.sql(retention, delete)


def _file(w: World, rel: str, text: str) -> Undo:
    path = w.settings.workspace_for("main") / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)

    async def undo() -> None:
        path.unlink()

    return undo


def _wal_frame(w: World, text: str) -> Undo:
    # A row written and deleted while a reader holds the WAL open: the row is gone, its frame is not.
    conn = std_sqlite3.connect(str(agent_paths(w.settings, "main").db_path), isolation_level=None)
    conn.execute("INSERT INTO memory_backups(created_at, content, content_hash) VALUES (1, ?, 'h')", (text,))
    conn.execute("DELETE FROM memory_backups")

    async def undo() -> None:
        conn.close()

    return undo


async def _redis_value(w: World, redis, text: str) -> Undo:
    key = f"arq:result:dream:plant-{w.settings.daemon.host_id}"
    await redis.set(key, ('{"r": {"promoted": [{"text": ' + _json(text) + "}]}}").encode(), ex=60)

    async def undo() -> None:
        await redis.delete(key)

    return undo


async def _redis_key_name(w: World, redis, text: str) -> Undo:
    key = f"memoryd:plant:{w.settings.daemon.host_id}:{text}".encode()
    await redis.set(key, b"1", ex=60)

    async def undo() -> None:
        await redis.delete(key)

    return undo


def _json(text: str) -> str:
    import json

    return json.dumps(text)  # ASCII escapes: the form json.dumps writes


LOCATIONS = (
    "table:short_term_entries",
    "table:memory_index_chunks",
    "table:memory_backups",
    "table:retention_objects",
    "table:a_new_table",
    "file:MEMORY.md",
    "file:memory/2026-09-22.md",
    "corpus file",
    "temp file",
    "state file",
    "WAL frame",
    "redis value",
    "redis key name",
)


async def plant(w: World, redis, where: str, text: str) -> Undo:
    if where.startswith("table:"):
        return await _row(w, where.removeprefix("table:"), text)
    if where.startswith("file:"):
        return _file(w, where.removeprefix("file:"), text)
    if where == "corpus file":
        line = render_line("main", "sessions/main/sess-x.jsonl", 2, text)
        return _file(w, "memory/.dreams/session-corpus/2026-09-22.txt", line + "\n")
    if where == "temp file":  # an atomic write interrupted before its rename
        return _file(w, "memory/.MEMORY.md.tmp-3f9a1c", text)
    if where == "state file":  # beside the stores, a temp file of an interrupted write
        path = w.settings.state_dir / "agents" / "main" / ".cursor.json.tmp-81f2"
        path.write_text(text)

        async def undo() -> None:
            path.unlink()

        return undo
    if where == "WAL frame":
        return _wal_frame(w, text)
    if where == "redis value":
        return await _redis_value(w, redis, text)
    return await _redis_key_name(w, redis, text)


# --- what is planted --------------------------------------------------------------------------------


@st.composite
def a_piece(draw: st.DrawFn) -> tuple[str, str, str]:
    """A piece of at least K characters (or a short message whole) of one form of one erased
    message, at a random offset in random surrounding text."""
    message = draw(st.sampled_from([LONG, UNICODE, SHORT, OBJECT]))
    form = draw(st.sampled_from(sorted(message_forms(message))))
    if len(form) < K:
        piece = form
    else:
        length = draw(st.integers(K, min(len(form), 3 * K)))
        start = draw(st.integers(0, len(form) - length))
        piece = form[start : start + length]
    around = st.text(alphabet="xyz #\n", max_size=40)
    return draw(around), piece, draw(around)


@st.composite
def a_derivation(draw: st.DrawFn) -> tuple[str, str, str]:
    """A registered text derivation (daemon/derivations.py) of one form of one erased message,
    whole or cut to its first 12+ characters, in either case."""
    message = draw(st.sampled_from([LONG, UNICODE, SHORT, OBJECT]))
    form = draw(st.sampled_from(sorted(derivation_inputs(message))))
    entry = draw(st.sampled_from([d for d in derivations.REGISTRY if d.source == "text"]))
    value = str(entry.function(form))
    value = value[: draw(st.integers(12, len(value)))]
    return " ", value.upper() if draw(st.booleans()) else value, " "


@settings(
    max_examples=14,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(planted=st.one_of(a_piece(), a_derivation()), where=st.sampled_from(LOCATIONS))
async def test_any_piece_of_an_erased_message_planted_anywhere_fails_the_verifier(
    world: World, redis, planted: tuple[str, str, str], where: str
) -> None:
    before, piece, after = planted
    # A piece every window of which a surviving session also says may stay through it.
    assume(before == " " or any(w.encode() in _kept(world) for w in windows(piece)))
    text = before + piece + after
    undo = await plant(world, redis, where, text)
    try:
        failed = await run_verify(world.settings, redis, world.subject)
    finally:
        await undo()
    assert failed.failed and not failed.verified, (where, text)
    clean = await run_verify(world.settings, redis, world.subject)
    assert clean.verified, clean


_KEPT: dict[int, set[bytes]] = {}


def _kept(w: World) -> set[bytes]:
    return _KEPT.setdefault(id(w), subject_pieces(w.subject))


# --- the audit's cases, one by one ----------------------------------------------------------------


def _failing(verification, check: str) -> list[str]:
    result = next(c for c in verification.checks if c.name == check)
    assert result.status == "failed" and result.count >= 1, verification
    return result.locations


async def test_a_hundred_characters_from_the_middle_of_a_message_in_a_workspace_file_fail(
    world: World, redis
) -> None:
    undo = _file(world, "memory/notes.md", f"# Notes\n\n{LONG[115:215]}\n")
    failed = await run_verify(world.settings, redis, world.subject)
    assert "agent main:workspace/memory/notes.md" in _failing(failed, "derivability")
    await undo()
    assert (await run_verify(world.settings, redis, world.subject)).verified


async def test_a_hundred_characters_from_the_middle_of_a_message_in_a_table_row_fail(
    world: World, redis
) -> None:
    undo = await _row(world, "memory_index_chunks", LONG[115:215])
    failed = await run_verify(world.settings, redis, world.subject)
    assert "agent main:memory_index_chunks.text" in _failing(failed, "derivability")
    await undo()
    assert (await run_verify(world.settings, redis, world.subject)).verified


async def test_the_first_forty_characters_of_a_message_in_a_table_row_fail(world: World, redis) -> None:
    undo = await _row(world, "short_term_entries", f"quoted: {LONG[:40]} (and more)")
    failed = await run_verify(world.settings, redis, world.subject)
    assert "agent main:short_term_entries.snippet" in _failing(failed, "derivability")
    await undo()


async def test_a_window_a_surviving_session_also_holds_is_not_residue(world: World, redis) -> None:
    shared = "the insurer wants the photographs"  # said in both sessions
    assert shared in LONG and shared in OMAR
    undo = await _row(world, "memory_backups", shared)
    assert (await run_verify(world.settings, redis, world.subject)).verified
    await undo()


async def test_a_file_the_verifier_cannot_read_fails_the_check_where_it_is(
    world: World, redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unread file is not a clean one: a workspace or state file that is there but cannot be
    read (made so by the verify.read failpoint: as root every file is readable) fails the check
    at its place, never passes it."""
    assert (await run_verify(world.settings, redis, world.subject)).verified
    monkeypatch.setenv(FAILPOINTS_ENV, "verify.read")
    failed = await run_verify(world.settings, redis, world.subject)
    assert not failed.verified
    unread = _failing(failed, "derivability")
    assert any(loc.startswith("agent main:workspace/") and loc.endswith("(unreadable)") for loc in unread)
    assert any(loc.startswith("state_dir:") and loc.endswith("(unreadable)") for loc in unread), unread
    monkeypatch.delenv(FAILPOINTS_ENV)
    assert (await run_verify(world.settings, redis, world.subject)).verified


# --- the rule itself, pure ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(data=st.data(), message=st.text(min_size=1, max_size=120))
def test_every_window_of_every_form_is_found_at_any_offset(data: st.DataObject, message: str) -> None:
    forms = [f for f in message_forms(message) if len(f) >= K]
    if not forms:
        return
    form = data.draw(st.sampled_from(sorted(forms)))
    length = data.draw(st.integers(K, len(form)))
    start = data.draw(st.integers(0, len(form) - length))
    haystack = (
        data.draw(st.binary(max_size=30))
        + form[start : start + length].encode("utf-8", "surrogatepass")
        + data.draw(st.binary(max_size=30))
    )
    matcher = PieceMatcher.of(pieces([message]))
    assert matcher is not None and matcher.hits(haystack) >= 1


def test_the_forms_include_the_exported_lines_unicode_forms_and_json_bodies() -> None:
    forms = message_forms('Café  ﬁne\n"quoted"  line')
    assert 'User: Café ﬁne "quoted" line' in forms
    assert 'Assistant: Café ﬁne "quoted" line' in forms
    assert unicodedata.normalize("NFKC", "Café ﬁne") in forms  # "Café fine"
    assert 'Caf\\u00e9 \\ufb01ne \\"quoted\\" line' in forms  # json.dumps of the collapsed text


def test_windows_shared_with_surviving_text_are_dropped_and_no_others() -> None:
    subject = pieces(["the heron nests by the old mill race every spring"])
    kept = without_shared(subject, ["we walked by the old mill race at dawn"])
    assert b"the old mill rac" not in kept
    assert b"the heron nests " in kept
    assert kept < subject


def test_a_needle_hit_counts_a_whole_copy_once() -> None:
    needles = compile_needles(VerifySubject(contents=(LONG,)))
    assert needles.hits(f"a: {LONG} b: {LONG[50:90]}") == 2


# --- what `memoryd verify` says --------------------------------------------------------------------


async def test_verify_without_a_subject_says_in_plain_words_that_it_checked_none(
    world: World, redis, tmp_path, capsys
) -> None:
    import anyio

    from memoryd.cli import main

    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{world.settings.state_dir}"\nsessions_root = "{world.settings.sessions_root}"\n'
        f'redis_url = "{world.settings.redis_url}"\n'
    )
    assert await anyio.to_thread.run_sync(main, ["--config", str(cfg), "verify"]) == 0
    out = capsys.readouterr().out
    headline = out.splitlines()[0]
    assert headline.startswith("Verified: not as an erasure (no subject was given")
    assert "NO" not in headline
    assert "  derivability: skipped — no erased subject given" in out


async def _nora_swept(tmp_path, sessions_root, unique, redis):
    """Settings of an agent whose one session, nora's direct chat of LONG, has been swept."""
    s = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    SessionStoreBuilder(sessions_root, "main").add(
        "agent:main:dm:nora", "sess-nora-1", [Msg("user", LONG)], participants=[{"actorId": "nora"}]
    )
    async with agent_runtime(s, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    return s


async def test_a_job_argument_naming_a_subject_without_a_memory_tool_scope_fails(
    tmp_path, sessions_root, unique, redis
) -> None:
    s = await _nora_swept(tmp_path, sessions_root, unique, redis)
    request = EraseRequest(scope=USER)  # nora never wrote a memory-tool object: no scope row
    _, subject = await api.plan_erase(s, request)
    assert (await erasure.run_erase(s, redis, request)).verified
    key = f"arq:job:remember:plant-{unique}"
    await redis.set(key, b'{"a": [], "k": {"scope": "' + USER.encode() + b'"}}', ex=60)
    try:
        failed = await run_verify(s, redis, subject)
        assert "redis:arq:job" in _failing(failed, "redis")
    finally:
        await redis.delete(key)


async def test_only_memoryds_own_erasure_ids_are_exempt_from_the_redis_check(
    tmp_path, sessions_root, unique, redis
) -> None:
    """An erasure's own record names its subject and is left alone; another tool's job whose id
    merely starts with `erase:` is looked into like any other value (the exemption is by
    memoryd's id format, memoryd.job_ids, never by a prefix anyone can write)."""
    from memoryd.job_ids import random_job_id

    s = await _nora_swept(tmp_path, sessions_root, unique, redis)
    request = EraseRequest(scope=USER)
    _, subject = await api.plan_erase(s, request)
    assert (await erasure.run_erase(s, redis, request)).verified
    value = b'{"t": 1, "f": "erase", "a": [{"scope": "' + USER.encode() + b'"}], "k": {}, "et": 1}'
    own, foreign = f"arq:result:{random_job_id('erase')}", f"arq:result:erase:plant-{unique}"
    try:
        await redis.set(own, value, ex=60)
        assert (await run_verify(s, redis, subject)).verified
        await redis.set(foreign, value, ex=60)
        assert "redis:arq:result" in _failing(await run_verify(s, redis, subject), "redis")
    finally:
        await redis.delete(own, foreign)


async def test_a_queued_purge_naming_the_subject_stays_and_the_receipt_waits_for_it(
    tmp_path, sessions_root, unique, redis
) -> None:
    """No purge deletes another (a queued forget of her session runs later), so the erasure leaves
    it, and its receipt waits for it: `waiting`, never `verified` while it is queued, verified once
    it has run. Anything else naming her still fails the check."""
    s = await _nora_swept(tmp_path, sessions_root, unique, redis)
    job_id = f"queued-forget-{unique}"
    key = f"arq:job:{job_id}"
    record = (
        b'{"t": 1, "f": "forget", "a": [{"agent": "main", "sessions": ["sess-nora-1"]}], "k": {}, "et": 1}'
    )
    await redis.set(key, record, ex=60)
    try:
        receipt = await erasure.run_erase(s, redis, EraseRequest(scope=USER))
        assert await redis.get(key) == record
        assert not receipt.verified and receipt.verification is not None
        assert receipt.verification.waiting_for == [job_id]
        check = next(c for c in receipt.verification.checks if c.name == "redis")
        assert (check.status, check.locations) == ("waiting", ["redis:queued purge job"])
        assert receipt.verification.headline.startswith("Verified: not yet (1 queued purge job(s)")

        assert await settle_waiting_receipts(s, redis) == 0  # still queued: still waiting
        await redis.delete(key)  # it ran (arq deletes the record; its result keeps no argument)
        assert await settle_waiting_receipts(s, redis) == 1
        [stored] = (await api.list_receipts(s)).receipts
        assert stored.verified and stored.verification is not None and not stored.verification.waiting_for
        assert next(c for c in stored.verification.checks if c.name == "redis").status == "passed"
        assert await settle_waiting_receipts(s, redis) == 0
    finally:
        await redis.delete(key)


async def test_a_queued_purge_does_not_hide_another_job_naming_the_subject(
    tmp_path, sessions_root, unique, redis
) -> None:
    s = await _nora_swept(tmp_path, sessions_root, unique, redis)
    _, subject = await api.plan_erase(s, EraseRequest(scope=USER))
    assert (await erasure.run_erase(s, redis, EraseRequest(scope=USER))).verified
    queued = f"arq:job:queued-forget-{unique}"
    other = f"memoryd:note:{unique}"
    await redis.set(
        queued, b'{"t": 1, "f": "forget", "a": [{"participant": "nora"}], "k": {}, "et": 1}', ex=60
    )
    await redis.set(other, b"nora", ex=60)
    try:
        found = await run_verify(s, redis, subject)
        assert not found.verified and _failing(found, "redis") == ["redis:memoryd:note"]
    finally:
        await redis.delete(queued, other)


async def test_a_key_whose_name_is_not_utf8_is_read_and_purged_by_its_bytes(
    tmp_path, sessions_root, unique, redis
) -> None:
    s = await _nora_swept(tmp_path, sessions_root, unique, redis)
    # An earlier result, under a name that is not UTF-8, holding the words to be erased.
    result = b"arq:result:dream:\xff\xfe" + unique.encode()
    named = b"memoryd:note:\xff:" + LONG[100:140].encode()
    await redis.set(result, b'{"r": {"promoted": [{"text": "' + LONG[20:80].encode() + b'"}]}}', ex=60)
    await redis.set(named, b"1", ex=60)
    request = EraseRequest(scope=USER)
    _, subject = await api.plan_erase(s, request)
    try:
        found = await run_verify(s, redis, subject)
        assert _failing(found, "redis") == ["redis:arq:result", "redis:memoryd:note"]
        receipt = await erasure.run_erase(s, redis, request)
        assert not await redis.exists(result)  # purged by its bytes
        # A key under memoryd's own prefix is not a job value: the erasure leaves it, and says so.
        assert not receipt.verified
        assert _failing(receipt.verification, "redis") == ["redis:memoryd:note"]
        await redis.delete(named)
        assert (await run_verify(s, redis, subject)).verified
    finally:
        await redis.delete(result, named)


_TEXT = st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(subject=_TEXT, shared=_TEXT)
def test_the_shared_forms_drop_exactly_the_windows_a_survivor_holds(subject: str, shared: str) -> None:
    """A survivor is searched in fewer forms than a subject has (retention/pieces.py
    shared_forms): it drops the same needles as searching every form of it would."""
    found = pieces([subject])
    held = [f.encode("utf-8", "surrogatepass") for f in message_forms(shared)]
    assert without_shared(found, [shared]) == {n for n in found if not any(n in h for h in held)}


def test_a_check_is_passed_failed_or_skipped_with_its_reason() -> None:
    from pydantic import ValidationError

    from memoryd.retention.receipts import VerificationCheck

    assert VerificationCheck(name="redis", status="skipped", count=0, note="no subject").status == "skipped"
    for bad in (
        {"status": "skipped", "count": 0},  # no reason
        {"status": "failed", "count": 0},  # a failure without findings
        {"status": "passed", "count": 2},  # a pass with findings
    ):
        with pytest.raises(ValidationError):
            VerificationCheck(name="redis", **bad)  # type: ignore[arg-type]


NO_NUL = st.characters(codec="utf-8", exclude_characters="\x00")  # NUL parts the values below


@given(
    subject=st.text(NO_NUL, min_size=6, max_size=20),
    before=st.text(NO_NUL, max_size=3),
    after=st.text(NO_NUL, min_size=1, max_size=3),
)
def test_a_subject_id_inside_a_surviving_id_is_not_residue_but_beside_it_is(
    subject: str, before: str, after: str
) -> None:
    bystander = before + subject + after
    needles = compile_needles(VerifySubject(ids=(subject,), shared_ids=(bystander,)))
    assert needles.hits(bystander) == 0
    assert needles.hits(f"{bystander}\x00{subject}") == 1
    assert needles.hits(subject) == 1
