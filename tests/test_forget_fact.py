"""Forgetting one fact (`forget --entry KEY`, `--match TEXT`): the entry and what was derived from
it go, its sessions keep their other memory, and the claim is suppressed from those sessions so
no ingest, dream, backfill or re-index brings it back. Through the CLI and the job queue, on
real Redis and real stores."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from memoryd.cli import main
from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.derivations import claim_hash
from memoryd.runtime.client import JobReport, MemorydClient
from memoryd.runtime.hosts import route_value
from memoryd.runtime.wire import queue_name
from memoryd.settings import Settings, load_settings
from memoryd.store.engine import sqlite3
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import REDIS_URL
from tests.daemon_harness import cleanup_redis

FACT = "Remember the deploy window is Friday afternoon."
OTHER = "My favourite colour is teal green today."
NEW = "The harbour gate code rotates every Monday."
CLAIM = claim_hash("User: " + FACT)
KEY = "memory:claim:" + CLAIM


def add_sessions(b: SessionStoreBuilder, *, again: bool = False) -> None:
    """nora says the fact and another; omar says the fact. `again`: nora repeats it later."""
    nora = [Msg("user", FACT), Msg("user", OTHER), Msg("assistant", "Noted, teal green it is.")]
    b.add(
        "agent:main:dm:nora",
        "s-nora",
        nora + ([Msg("user", FACT)] if again else []),
        participants=[{"actorId": "nora"}],
        chatType="direct",
    )
    b.add(
        "agent:main:dm:omar",
        "s-omar",
        [Msg("user", FACT)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )


def write_config(tmp_path: Path, sessions_root: Path, unique: str, **extra: str) -> Path:
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[daemon]\nhost_id = "test-{unique}"\n\n'
        + "".join(extra.values())
        + "[dreaming]\nmin_score = 0\nmin_recall_count = 0\nmin_unique_queries = 0\n"
    )
    return path


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, unique: str) -> Path:
    add_sessions(SessionStoreBuilder(sessions_root, "main"))
    return write_config(tmp_path, sessions_root, unique)


def cli(capsys: pytest.CaptureFixture[str], config: Path, *args: str, code: int = 0) -> dict:
    got = main(["--config", str(config), *args, "--json"])
    out, err = capsys.readouterr()
    assert got == code, err
    return json.loads(out)


def derive(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    cli(capsys, config, "ingest", "--agent", "main")
    cli(capsys, config, "dream", "--agent", "main")
    cli(capsys, config, "index", "--agent", "main")
    assert FACT in memory_text(config)


def workspace(config: Path) -> Path:
    return load_settings(config).workspace_for("main")


def memory_text(config: Path) -> str:
    ws = workspace(config)
    return "".join(p.read_text() for p in (ws / "MEMORY.md", ws / "DREAMS.md") if p.exists())


def corpus_text(config: Path) -> str:
    return "".join(p.read_text() for p in (workspace(config) / "memory").rglob("*.txt"))


def query(config: Path, sql: str) -> list[tuple]:
    db = load_settings(config).state_dir / "agents" / "main" / "memory.sqlite"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def hits(capsys: pytest.CaptureFixture[str], config: Path, text: str) -> list[str]:
    found = cli(capsys, config, "search", "--agent", "main", text)["results"]
    return [r["snippet"] for r in found if text in r["snippet"]]


def test_forgetting_a_fact_by_its_text_applies_exactly_its_preview_and_keeps_the_sessions_other_facts(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    derive(capsys, config)
    assert hits(capsys, config, "deploy window")

    preview = cli(capsys, config, "forget", "--agent", "main", "--match", FACT, "--dry-run")
    applied = cli(capsys, config, "forget", "--agent", "main", "--match", FACT)

    assert preview == {**applied, "dryRun": True}
    chosen = {e["entryKey"]: e for e in preview["forgottenEntries"]}
    assert chosen[KEY]["text"] == "User: " + FACT
    assert chosen[KEY]["origins"] == [
        {"sessionId": "s-nora", "sessionKey": "agent:main:dm:nora"},
        {"sessionId": "s-omar", "sessionKey": "agent:main:dm:omar"},
    ]
    assert preview["sessionIds"] == [] and preview["counts"]["sessionsRecordedForgotten"] == 0
    assert preview["counts"]["suppressedClaims"] == 2
    # The promoted line and the diary's candidate and lasting truth quoting it go together.
    assert preview["counts"]["entriesRemoved"] >= 3 and preview["artifacts"]["sessionCorpusLines"] == 2
    assert FACT not in memory_text(config) and FACT not in corpus_text(config)
    assert OTHER in memory_text(config) and OTHER in corpus_text(config)
    assert query(config, f"SELECT count(*) FROM short_term_entries WHERE snippet LIKE '%{FACT}%'") == [(0,)]
    assert query(config, "SELECT claim_hash, session_id FROM suppressed_claims ORDER BY 2") == [
        (CLAIM, "s-nora"),
        (CLAIM, "s-omar"),
    ]
    # No session is forgotten: nothing else of theirs went.
    assert query(config, "SELECT count(*) FROM memory_session_tombstones") == [(0,)]
    cli(capsys, config, "index", "--agent", "main")
    assert not hits(capsys, config, "deploy window") and hits(capsys, config, "teal green")

    rerun = cli(capsys, config, "forget", "--agent", "main", "--entry", KEY)  # converges
    assert rerun["counts"]["suppressedClaims"] == 2 and rerun["artifacts"]["shortTermEntries"] == 0


def test_a_forgotten_fact_does_not_come_back_through_ingest_backfill_dreaming_or_a_forced_index(
    config: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    derive(capsys, config)
    key = cli(capsys, config, "forget", "--agent", "main", "--match", FACT, "--dry-run")["forgottenEntries"][
        0
    ]
    cli(capsys, config, "forget", "--agent", "main", "--entry", key["entryKey"])
    b = SessionStoreBuilder(sessions_root, "main")
    add_sessions(b, again=True)  # nora says it once more
    b.add("agent:main:dm:nora:2", "s-new", [Msg("user", NEW)], participants=[{"actorId": "nora"}])

    backfill = cli(capsys, config, "backfill", "--agent", "main", "--apply")
    assert backfill["stagedEntries"] >= 1  # the new session's fact; not the forgotten one
    ingest = cli(capsys, config, "ingest", "--agent", "main")
    assert ingest["messagesSuppressed"] >= 1
    cli(capsys, config, "dream", "--agent", "main")
    cli(capsys, config, "index", "--agent", "main", "--force")

    assert NEW in memory_text(config) and OTHER in memory_text(config)
    assert FACT not in memory_text(config) and FACT not in corpus_text(config)
    assert query(config, f"SELECT count(*) FROM short_term_entries WHERE snippet LIKE '%{FACT}%'") == [(0,)]
    assert not hits(capsys, config, "deploy window") and hits(capsys, config, "harbour gate")


def test_dreaming_never_promotes_a_staged_claim_suppressed_from_every_session_it_came_from(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """However the entry got back (a writer that did not know the suppression), dreaming skips it."""
    cli(capsys, config, "ingest", "--agent", "main")
    db = load_settings(config).state_dir / "agents" / "main" / "memory.sqlite"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "INSERT INTO suppressed_claims VALUES (?, 's-nora', 0), (?, 's-omar', 0)", (CLAIM, CLAIM)
        )
    conn.close()
    dreamt = cli(capsys, config, "dream", "--agent", "main")
    assert FACT not in memory_text(config) and OTHER in memory_text(config)
    assert all(FACT not in p["text"] for p in dreamt["deep"]["promoted"])


def test_an_unknown_key_is_one_line_exit_2_and_text_that_matches_nothing_says_so(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    derive(capsys, config)
    before = memory_text(config)
    for dry in ((), ("--dry-run",)):
        assert (
            main(["--config", str(config), "forget", "--agent", "main", "--entry", "memory:claim:nope", *dry])
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "'memory:claim:nope'" in err and "memoryd search" in err

    assert main(["--config", str(config), "forget", "--agent", "main", "--match", "deploy window"]) == 0
    out = capsys.readouterr().out
    assert "has the text 'deploy window'; it selects nothing" in out
    assert memory_text(config) == before

    mixed = main(
        ["--config", str(config), "forget", "--agent", "main", "--match", FACT, "--session", "s-nora"]
    )
    assert mixed == 2 and "not both in one request" in capsys.readouterr().err


def test_forgetting_a_session_takes_its_suppressed_claims_and_a_fresh_verify_finds_a_planted_one(
    tmp_path: Path, sessions_root: Path, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    add_sessions(SessionStoreBuilder(sessions_root, "main"))
    config = write_config(
        tmp_path, sessions_root, unique, index='[index]\nsources = ["memory", "sessions"]\n\n'
    )
    derive(capsys, config)
    cli(capsys, config, "forget", "--agent", "main", "--match", FACT)
    assert len(query(config, "SELECT * FROM suppressed_claims")) == 2

    out = cli(capsys, config, "forget", "--agent", "main", "--session", "s-omar", "--verify")
    assert out["verification"]["verified"] is True, out["verification"]
    assert query(config, "SELECT claim_hash, session_id FROM suppressed_claims") == [(CLAIM, "s-nora")]

    # A suppression row holding a hash of the forgotten session's words is residue the verifier finds.
    db = load_settings(config).state_dir / "agents" / "main" / "memory.sqlite"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO suppressed_claims VALUES (?, 's-nora', 0)", (claim_hash("User: " + NEW),))
    conn.close()
    SessionStoreBuilder(sessions_root, "main").add(
        "agent:main:dm:omar",
        "s-omar",
        [Msg("user", FACT), Msg("user", NEW)],
        participants=[{"actorId": "omar"}],
    )
    again = cli(capsys, config, "forget", "--agent", "main", "--session", "s-omar", "--verify", code=1)
    failed = [c for c in again["verification"]["checks"] if c["status"] == "failed"]
    assert failed and any("memory.sqlite" in loc for c in failed for loc in c["locations"]), failed


async def _forget_through_the_queue(settings: Settings) -> tuple[JobReport, JobReport]:
    """A preview by `match`, then the purge by `entries`, each a `forget` job run by the daemon's
    own worker."""
    from tests.worker_harness import run_jobs

    host = settings.daemon.host_id
    queue = queue_name(host)
    r = Redis.from_url(REDIS_URL)
    jobs: list[str] = []
    try:
        await r.hset(AGENT_OWNER_KEY, "main", route_value(queue, settings.deployment, "store"))
        await r.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
        async with MemorydClient.connect(settings) as client:
            reports = []
            for payload in (
                {"agent": "main", "match": FACT, "dry_run": True},
                {"agent": "main", "entries": [KEY]},
            ):
                job = await client.enqueue_forget(payload)
                jobs.append(job.job_id)
                await run_jobs(settings, queue)
                reports.append(await client.wait(job.job_id, queue=queue, timeout_s=60))
                stored = await r.get(f"arq:result:{job.job_id}")
                assert stored is not None and FACT.encode() not in stored and CLAIM.encode() not in stored
        return reports[0], reports[1]
    finally:
        await r.aclose()
        cleanup_redis(REDIS_URL, [host], ["main"], jobs)


def test_the_forget_job_takes_entries_and_match_and_applies_what_it_previewed(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    derive(capsys, config)

    preview, applied = anyio.run(_forget_through_the_queue, load_settings(config))

    assert preview.state == applied.state == "complete", (preview.error, applied.error)
    assert preview.result is not None and applied.result is not None
    assert preview.result == {**applied.result, "dryRun": True}
    assert applied.result["counts"]["suppressedClaims"] == 2
    assert applied.result["forgottenEntries"] == []  # a stored result names no entry, text or session
    assert FACT not in memory_text(config) and OTHER in memory_text(config)
    assert len(query(config, "SELECT * FROM suppressed_claims")) == 2


def test_erasing_a_user_takes_the_suppressed_claims_of_their_sessions_and_verifies(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    derive(capsys, config)
    cli(capsys, config, "forget", "--agent", "main", "--match", FACT)

    receipt = cli(capsys, config, "erase", "--scope", "tenant:default:user:omar")

    assert receipt["state"] == "complete" and receipt["verified"] is True, receipt
    # omar's session is erased; nora's suppression (she said it too) stays in force.
    assert query(config, "SELECT claim_hash, session_id FROM suppressed_claims") == [(CLAIM, "s-nora")]
    assert FACT not in memory_text(config) and OTHER in memory_text(config)


def test_indexed_transcripts_of_the_facts_sessions_are_indexed_again_without_it(
    tmp_path: Path, sessions_root: Path, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    add_sessions(SessionStoreBuilder(sessions_root, "main"))
    config = write_config(
        tmp_path, sessions_root, unique, index='[index]\nsources = ["memory", "sessions"]\n\n'
    )
    derive(capsys, config)
    found = cli(capsys, config, "search", "--agent", "main", "deploy window")["results"]
    assert {r["source"] for r in found} == {"memory", "sessions"}

    out = cli(capsys, config, "forget", "--agent", "main", "--match", FACT)
    assert out["artifacts"]["indexSources"] == 2  # both transcripts, to be indexed again
    for force in ((), ("--force",)):
        cli(capsys, config, "index", "--agent", "main", *force)
        assert not cli(capsys, config, "search", "--agent", "main", "deploy window")["results"]
        kept = cli(capsys, config, "search", "--agent", "main", "teal green")["results"]
        assert {r["source"] for r in kept} == {"memory", "sessions"}


def test_a_fact_forgotten_from_a_group_stays_forgotten_when_an_erasure_separates_the_group(
    tmp_path: Path, sessions_root: Path, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """olga's fact is forgotten from the group chat; nadia is then erased, which separates the
    chat (it is read again for olga without nadia's turns). Before, the purge dropped the chat's
    suppressions with it, and the re-read staged olga's forgotten fact again."""
    from tests.erase_world import NADIA_GROUP_TEXT, OLGA_GROUP_TEXT, add_group_world

    add_group_world(sessions_root)
    config = write_config(tmp_path, sessions_root, unique)
    cli(capsys, config, "ingest", "--agent", "main")
    assert OLGA_GROUP_TEXT in corpus_text(config)
    cli(capsys, config, "forget", "--agent", "main", "--match", OLGA_GROUP_TEXT)
    cli(capsys, config, "forget", "--agent", "main", "--match", NADIA_GROUP_TEXT)  # hers, too
    assert f"] User: {OLGA_GROUP_TEXT}" not in corpus_text(config)
    olga_claim = claim_hash("User: " + OLGA_GROUP_TEXT)
    nadia_claim = claim_hash("User: " + NADIA_GROUP_TEXT)
    before = set(query(config, "SELECT claim_hash, session_id FROM suppressed_claims"))
    assert {(olga_claim, "sess-group-1"), (nadia_claim, "sess-group-1")} <= before

    receipt = cli(capsys, config, "erase", "--scope", "tenant:default:user:nadia")
    assert receipt["state"] == "complete" and receipt["verified"] is True, receipt
    assert receipt["artifacts"]["sharedSessionsSeparated"] == 1, receipt
    cli(capsys, config, "ingest", "--agent", "main")  # the separated chat is read again for olga

    rows = query(config, "SELECT claim_hash, session_id FROM suppressed_claims")
    assert (olga_claim, "sess-group-1") in rows
    assert nadia_claim not in {c for c, _ in rows}  # no hash of her words is kept for her
    corpus = corpus_text(config)
    assert f"] User: {OLGA_GROUP_TEXT}" not in corpus and NADIA_GROUP_TEXT not in corpus
