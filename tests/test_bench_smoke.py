"""Smoke test of the benchmark tooling at a tiny scale: the generated store is one memoryd reads,
and a baseline scenario runs end to end through `python -m bench` and writes its JSON rows."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import orjson
import pytest

from bench.baselines import noop, orjson_parse
from bench.corpus import generate
from bench.runner import Context, at_least, at_most
from memoryd.sessions.json_store import JsonSessionSource

ROOT = Path(__file__).resolve().parent.parent


def test_generated_store_is_read_by_the_session_source_with_every_session_kind(tmp_path: Path) -> None:
    manifest = generate(tmp_path / "sessions", "tiny", sessions=80)
    sessions = []
    archives = []
    for agent in manifest.agents:
        source = JsonSessionSource(agent, tmp_path / "sessions" / "agents" / agent / "sessions")
        listing = source.list_sessions()
        assert listing.errors == ()
        sessions += listing.sessions
        archives += source.list_archives()
    assert len(sessions) == sum(manifest.agents.values())
    assert {s.hook_source for s in sessions} >= {"gmail", "email", "webhook"}
    assert {s.chat_type for s in sessions} >= {"direct", "group"}
    assert {s.session_kind for s in sessions} >= {"interactive", "cron"}
    assert any(len(s.participants) >= 3 for s in sessions if s.chat_type == "group")
    assert len(archives) == manifest.archives > 0
    messages, chars = orjson_parse(Path(s.locator) for s in sessions)
    assert messages == manifest.messages
    assert 50 <= chars / messages <= 2000


def test_generator_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", "tiny", sessions=12)
    b = generate(tmp_path / "b", "tiny", sessions=12)
    assert (a.messages, a.transcript_bytes, a.targets) == (b.messages, b.transcript_bytes, b.targets)


def test_ratio_rows_pass_and_fail_on_the_stated_factor(tmp_path: Path) -> None:
    assert at_least("s", "f", "msg/s", [60.0, 50.0, 55.0], [100.0], 0.5).passed is True
    assert at_least("s", "f", "msg/s", [40.0], [100.0], 0.5).passed is False
    row = at_most("s", "f", "s", [3.0], [1.0], 2.0)
    assert row.passed is False and row.ratio == 3.0
    assert list(row.as_json())[:7] == ["scenario", "figure", "median", "baseline", "ratio", "target", "pass"]
    ctx = Context("tiny", None, tmp_path, warmup=1, reps=3)  # type: ignore[arg-type]
    calls: list[str] = []
    samples = ctx.interleaved(lambda: calls.append("a") or 1.0, lambda: calls.append("b") or 2.0)
    assert samples == [[1.0] * 3, [2.0] * 3] and calls == ["a", "b"] * 4


def test_noop_job_returns_a_result_of_the_size_asked_for() -> None:
    # The forget_job baseline stores and reads a result as large as the forget report.
    assert len(orjson.dumps(anyio.run(noop, {}, {"result_bytes": 3_000}))) == 3_000 + len('{"pad":""}')
    assert anyio.run(noop, {}, None) == {}


@pytest.mark.slow
def test_bench_cli_runs_a_baseline_scenario_and_writes_json_rows(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    env = {**os.environ, "MEMORYD_BENCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--scale", "tiny", "--only", "erase", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())
    baseline = next(r for r in rows if r["figure"].startswith("baseline: indexed UPDATE"))
    assert baseline["median"] > 0 and baseline["peak_rss_mb"] > 0
    assert all(
        {"scenario", "figure", "median", "baseline", "ratio", "target", "pass"} <= set(r) for r in rows
    )
    assert "erase" in proc.stdout and "baseline" in proc.stdout


def test_merge_growth_cuts_its_rows_into_the_serial_sweeps_batches(tmp_path: Path) -> None:
    from bench.scenarios.merge_growth import _write_step
    from memoryd.constants import INGEST_FLUSH_MESSAGES

    batches = _write_step(tmp_path, 0, 12_000)
    sizes = [sum(p.hi - p.lo + 1 for p in b.parts) for b in batches]
    assert sum(sizes) == 12_000 and max(sizes) == INGEST_FLUSH_MESSAGES
    covered = sorted((p.path, p.lo, p.hi) for b in batches for p in b.parts)
    for (path, _lo, hi), (next_path, next_lo, _hi) in itertools.pairwise(covered):
        assert path != next_path or next_lo == hi + 1  # each row once, none skipped
    # A session split between two batches has its seen hashes written row by row in both.
    split = [sid for b in batches for sid in b.rowwise]
    assert split and all(split.count(sid) == 2 for sid in split)
    checkpointed = [c.session_id for b in batches for c in b.checkpoints]
    assert len(checkpointed) == len(set(checkpointed))  # once each, with its last batch
    # On a store of 84,000 staged entries the batches are batch_limit's larger ones.
    from memoryd.ingest.batch import batch_limit

    (tmp_path / "later").mkdir()
    later = _write_step(tmp_path / "later", 7, 12_000)
    sizes = [sum(p.hi - p.lo + 1 for p in b.parts) for b in later]
    assert batch_limit(84_000) == 8_400 and sizes == [8_400, 3_600]
