"""The pure parts of live ingestion: what a sweep's report asks for next, which enqueued
scheduled jobs are sweeps to follow, and how requests coalesce."""

from __future__ import annotations

import os

import anyio

from memoryd.ingest.report import IngestReport
from memoryd.runtime.client import JobReport
from memoryd.runtime.live import FollowUp, Wanted, follow_up, scheduled_sweep_agents
from memoryd.runtime.watch import content_changed


def _finished_sweep(result: dict[str, object]) -> JobReport:
    """A complete ingest sweep job whose stored result is `result`."""
    return JobReport(
        job_id="ingest_sweep:main:live:00",
        function="ingest_sweep",
        queue=None,
        state="complete",
        tries=1,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        error=None,
        result=result,
    )


def _report(**counts: int) -> IngestReport:
    """A finished sweep's report as the live loop reads it: its job's result through the model."""
    result = IngestReport(agent_id="main", **counts).model_dump(mode="json", by_alias=True)
    report = _finished_sweep(result).result_as(IngestReport)
    assert report is not None
    return report


def test_a_result_that_is_not_the_families_report_reads_as_none() -> None:
    assert _finished_sweep({"sessionsScanned": "many"}).result_as(IngestReport) is None


def test_a_sweep_that_left_work_runs_again_and_one_that_read_something_is_indexed() -> None:
    assert follow_up(None, indexes_transcripts=True) == FollowUp(False, False)
    assert follow_up(_report(sessionsScanned=0, messagesStaged=0), indexes_transcripts=True) == FollowUp(
        False, False
    )
    assert follow_up(_report(sessionsScanned=2, messagesStaged=0), indexes_transcripts=True) == FollowUp(
        False, True
    )
    assert follow_up(_report(sessionsDeferred=3, sessionsScanned=1), indexes_transcripts=True) == FollowUp(
        True, True
    )
    assert follow_up(_report(sessionsCapped=1, messagesStaged=80), indexes_transcripts=True) == FollowUp(
        True, True
    )


def test_without_transcripts_in_the_index_a_sweep_asks_for_no_index_sync() -> None:
    # The staged corpus is under memory/.dreams, which the index never reads.
    assert follow_up(_report(sessionsScanned=2, messagesStaged=5), indexes_transcripts=False) == FollowUp(
        False, False
    )
    assert follow_up(_report(sessionsCapped=1, messagesStaged=80), indexes_transcripts=False) == FollowUp(
        True, False
    )


def test_only_scheduled_ingest_sweeps_of_served_agents_are_followed() -> None:
    ids = [
        "ingest_sweep:main:sched:d:17",
        "index_sync:main:sched:d:17",
        "ingest_sweep:other:sched:d:17",
        "dream:x",
    ]
    assert scheduled_sweep_agents(ids, ["main"]) == [("main", "ingest_sweep:main:sched:d:17")]


async def test_many_requests_before_a_take_are_one() -> None:
    wanted = Wanted()
    for _ in range(200):
        wanted.set("change")
    assert await wanted.take() == "change"
    with anyio.move_on_after(0.05) as scope:
        await wanted.take()
    assert scope.cancelled_caught  # nothing more was asked for
    wanted.set("backlog")
    wanted.set("change")
    assert await wanted.take() == "backlog"  # the first reason of a coalesced request is kept


def test_only_a_change_of_size_mtime_or_existence_counts_as_content(tmp_path) -> None:
    wal = tmp_path / "db.sqlite-wal"
    wal.write_bytes(b"x" * 10)
    seen: dict = {}
    assert content_changed([str(wal)], seen)  # first seen
    os.chmod(wal, 0o600)  # metadata only (as SQLite's chown of the WAL on open)
    assert not content_changed([str(wal)], seen)
    with wal.open("ab") as fh:
        fh.write(b"y")
    assert content_changed([str(wal)], seen)
    wal.unlink()
    assert content_changed([str(wal)], seen)


def test_a_readers_empty_wal_coming_and_going_is_not_content(tmp_path) -> None:
    wal = tmp_path / "db.sqlite-wal"
    seen: dict = {str(wal): None}  # no WAL: the last writer's close checkpointed it away
    wal.write_bytes(b"")  # a reader's open creates an empty one …
    assert not content_changed([str(wal)], seen)
    wal.unlink()  # … and its close removes it
    assert not content_changed([str(wal)], seen)
    wal.write_bytes(b"frame")  # a writer's frame is content
    assert content_changed([str(wal)], seen)


def test_a_watch_error_names_the_watched_directory_never_a_file_in_it(tmp_path) -> None:
    from memoryd.runtime.watch import watch_error_line

    d = tmp_path / "agents" / "main" / "sessions"
    exc = RuntimeError(f'Permission denied (os error 13) about ["{d}/sid-secret.jsonl", "{d}"]\nmore')
    line = watch_error_line(exc, [d])
    assert line == f'Permission denied (os error 13) about ["{d}/…", "{d}"]'
    assert "sid-secret" not in line
    assert watch_error_line(OSError(), [d]) == "OSError"
