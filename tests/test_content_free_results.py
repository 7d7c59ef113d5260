"""Job results in Redis are content-free (DESIGN §6): counts, states and the run's own names
only, for every job family. A forget also purges earlier values naming what it forgot.

Real Redis, real stores, the daemon's own worker; data no other test uses."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Annotated, Any

import anyio
import click
import orjson
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from memoryd.commands import CliState
from memoryd.commands.service import register
from memoryd.ops.registry import OPS
from memoryd.plain_report import PlainReport
from memoryd.redis_values import scan_values
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from memoryd.stored_form import Content, is_content, stored_form
from tests.builders import Msg, SessionStoreBuilder
from tests.daemon_harness import cleanup_redis, write_config
from tests.worker_harness import run_jobs

ZED_TEXT = (
    "Remember that the quokka ledger balances on the ninth tram stop.",
    "Remember that the marzipan glacier opens at twilight sharp.",
)
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."

# Fields that hold the run's own names, states and settings, never memory content or subjects.
NAMES = {
    "agent_id",
    "agentId",
    "sweep_at",
    "phases",
    "mode",
    "provider",
    "model",
    "vector_backend",
    "source",
    "reason",
    "from_day",
    "to_day",
    "day",
    "receipt_id",
    "request_id",
    "state",
    "hold_id",
    "name",
    "status",
    "locations",  # verifier location kinds (the receipt's stored form drops workspace paths)
    "waiting_for",  # ids of queued purge jobs a receipt waits for (random, never a subject)
    "note",
    # dict[str, int] counts keyed by reason or kind
    "sessions_excluded",
    "lines_skipped",
    "rejected",
    "consolidation",
    "forget",
}


def _annotations(report_type: type) -> dict[str, Any]:
    """Each field of a report class (a pydantic model or a plain report dataclass) and its type."""
    if dataclasses.is_dataclass(report_type):
        hints = typing.get_type_hints(report_type)
        return {f.name: hints[f.name] for f in dataclasses.fields(report_type)}
    return {name: field.annotation for name, field in report_type.model_fields.items()}  # type: ignore[attr-defined]


def _is_report(kind: Any) -> bool:
    return isinstance(kind, type) and (issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind))


def _text_fields(model: type, seen: set[type]) -> list[str]:
    """The fields of `model` (at any depth) that can hold a string and are not marked Content."""
    out: list[str] = []
    for name, annotation in _annotations(model).items():
        if is_content(model, name):
            continue
        inner = [a for arg in typing.get_args(annotation) for a in (arg, *typing.get_args(arg))]
        kinds = [annotation, *inner]
        for kind in kinds:
            if _is_report(kind) and kind not in seen:
                seen.add(kind)
                out += [f"{name}.{f}" for f in _text_fields(kind, seen)]
        if str in kinds and name not in NAMES:
            out.append(name)
    return out


def test_every_result_field_that_can_hold_text_is_marked_content_or_a_name():
    unmarked = {op.contract.name: _text_fields(op.contract.result(), set()) for op in OPS}
    assert {k: v for k, v in unmarked.items() if v} == {}


def _needles(session_ids: list[str]) -> list[str]:
    return [*ZED_TEXT, *(t[10:40] for t in ZED_TEXT), *session_ids, "quokka ledger", "marzipan glacier"]


def _quoting(strings: list[str], needles: list[str]) -> list[str]:
    return [n for n in needles if any(n in s for s in strings)]


@pytest.fixture
def world(tmp_path: Path, sessions_root: Path, redis_url: str, unique: str):
    b = SessionStoreBuilder(sessions_root, "main")
    zed_sessions = [f"sess-zed-{unique}-{i}" for i in range(2)]
    for sid, text in zip(zed_sessions, ZED_TEXT, strict=True):
        b.add(
            f"agent:main:dm:zed-{sid}",
            sid,
            [Msg("user", text), Msg("assistant", "Noted: " + text)],
            participants=[{"actorId": "zed"}],
            chatType="direct",
        )
    b.add(
        "agent:main:dm:omar",
        f"sess-omar-{unique}",
        [Msg("user", OMAR_TEXT), Msg("assistant", "Noted: " + OMAR_TEXT)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    host = f"test-{unique}"
    extra = (
        '[index]\nsources = ["memory", "sessions"]\n[index.embedding]\nprovider = "hashing"\n\n'
        "[dreaming]\nmin_score = 0\nmin_recall_count = 0\nmin_unique_queries = 0\n"
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
        extra=extra,
    )
    job_ids: list[str] = []
    yield config, zed_sessions, job_ids
    cleanup_redis(redis_url, [host], [], job_ids)


async def _run(client: MemorydClient, settings: Any, job_ids: list[str], name: str, payload: dict) -> dict:
    queue = queue_name(settings.daemon.host_id)
    job = await client.enqueue(name, payload, queue=queue)
    job_ids.append(job.job_id)
    await run_jobs(settings, queue)
    report = await client.job(job.job_id, queue=queue)
    assert report.state == "complete" and report.result is not None, (name, report.error)
    return report.result


async def test_no_redis_value_names_a_forgotten_participants_text_or_sessions(world, redis):
    config, zed_sessions, job_ids = world
    settings = load_settings(config)
    # A result stored before results were content-free (a dream's promoted text, its sessions).
    legacy = f"arq:result:dream:legacy-{zed_sessions[0]}"
    legacy_value = {
        "s": True,
        "r": {"deep": {"promoted": [{"text": ZED_TEXT[0], "sessionIds": zed_sessions}]}},
    }
    await redis.set(legacy, orjson.dumps(legacy_value), px=600_000)
    job_ids.append(legacy.removeprefix("arq:result:"))
    async with MemorydClient.connect(settings) as client:
        ingest = await _run(client, settings, job_ids, "ingest_sweep", {"agent": "main"})
        dream = await _run(client, settings, job_ids, "dream", {"agent": "main"})
        index = await _run(client, settings, job_ids, "index_sync", {"agent": "main"})
        await _run(client, settings, job_ids, "backfill", {"agent": "main"})
        preview = await _run(
            client, settings, job_ids, "forget", {"agent": "main", "participants": ["zed"], "dry_run": True}
        )
        forget = await _run(client, settings, job_ids, "forget", {"agent": "main", "participants": ["zed"]})
    # The text was there to quote: staged, promoted, indexed, then forgotten.
    assert ingest["messagesStaged"] >= 4 and dream["deep"]["promoted"] and index["chunksWritten"] > 0
    assert preview["artifacts"]["shortTermEntries"] > 0 and forget["artifacts"]["shortTermEntries"] > 0
    needles = _needles(zed_sessions)
    found = {key: hits async for key, strings in scan_values(redis) if (hits := _quoting(strings, needles))}
    assert found == {}
    # What `memoryd jobs --json` prints comes from the same values.

    @click.group()
    def cli() -> None:
        click.get_current_context().obj = CliState(str(config))

    register(cli)
    listed = await anyio.to_thread.run_sync(CliRunner().invoke, cli, ["jobs", "--json"])
    assert listed.exit_code == 0, listed.output
    assert len(orjson.loads(listed.output)) >= 6
    assert _quoting([listed.output], needles) == []


def test_the_stored_form_blanks_what_a_direct_caller_still_gets():
    from memoryd.dreaming.report import PromotedEntry

    entry = PromotedEntry(entry_key="memory:claim:ab", score=0.5, session_ids=["s1"], text=ZED_TEXT[0])
    stored = stored_form(entry)
    assert (stored.text, stored.session_ids, stored.entry_key, stored.score) == ("", [], "", 0.5)
    assert entry.text == ZED_TEXT[0]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Origin(PlainReport):
    session_id: Annotated[str, Content]
    kind: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Plain(PlainReport):
    agent_id: str
    keys: Annotated[list[str], Content]
    origins: list[_Origin]
    note: Annotated[str | None, Content] = None


def test_the_stored_form_blanks_content_of_a_plain_report_at_any_depth():
    # A plain report (daemon/plain_report.py) marks its fields as a model does, in `Annotated`.
    report = _Plain(agent_id="main", keys=["k1"], origins=[_Origin(session_id="s1", kind="live")])
    stored = stored_form(report)
    assert stored == _Plain(agent_id="main", keys=[], origins=[_Origin(session_id="", kind="live")])
    assert report.keys == ["k1"] and report.origins[0].session_id == "s1"
    assert is_content(_Plain, "note") and not is_content(_Plain, "origins")
