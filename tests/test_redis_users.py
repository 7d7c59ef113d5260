"""Least privilege on Redis: the two ACL users of deploy/redis.conf, loaded as shipped into a
redis-server of the test's own. A submitter (`memoryd enqueue`, logged in through
`redis.username` and `redis.password_file`) enqueues a forget that a real `memoryd run`, logged
in as the daemons' user, completes; the submitter cannot write what only daemons may."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis as sync_redis
from redis.exceptions import NoPermissionError

from memoryd.constants import AGENT_OWNER_KEY, FENCE_KEY, HEARTBEATS_KEY, HOST_KEY, LOCK_KEY
from memoryd.errors import ConfigError
from memoryd.redis_conn import connect_redis
from memoryd.settings import load_settings
from tests import redis_servers
from tests.builders import Msg, SessionStoreBuilder
from tests.daemon_harness import forgotten, run_cli, start_daemon, stop_cleanly

DAEMON, SUBMITTER = redis_servers.DAEMON_USER, redis_servers.SUBMITTER_USER


@pytest.fixture
def server(tmp_path: Path):
    with redis_servers.production_redis(tmp_path / "redis") as server:
        yield server


def _submitter_config(tmp_path: Path, server: redis_servers.ProductionRedis, deployment: str) -> Path:
    """The submitter's config: the URL names no user; the user and the password file do. It
    names the daemons' deployment (its own state_dir would derive another)."""
    secret = tmp_path / "submit.pass"
    secret.write_text(SUBMITTER[1] + "\n")
    secret.chmod(0o600)
    config = tmp_path / "submit.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "submit-state"}"\nredis_url = "{server.url()}"\n\n'
        f'[redis]\nusername = "{SUBMITTER[0]}"\npassword_file = "{secret}"\n\n'
        f'[daemon]\ndeployment_id = "{deployment}"\n'
    )
    return config


def test_a_submitter_enqueues_a_forget_that_a_daemon_of_the_daemon_user_completes(server, tmp_path):
    sessions = tmp_path / "sessions"
    store = SessionStoreBuilder(sessions, "main")
    store.add("k1", "s1", [Msg("user", "the harbour rota is on tuesdays"), Msg("assistant", "noted")])
    store.add("k2", "s2", [Msg("user", "keep this one")])
    daemon_dir = tmp_path / "daemon"
    daemon_dir.mkdir()
    settings, notify, daemon = start_daemon(daemon_dir, sessions, server.url(DAEMON), "h1", schedule=True)
    try:
        notify.wait_for("READY=1")
        submit = _submitter_config(tmp_path, server, settings.deployment)
        ingest = run_cli(submit, "enqueue", "ingest", "--agent", "main", "--wait", "--json")
        assert ingest.returncode == 0, ingest.stderr
        done = run_cli(submit, "enqueue", "forget", "--agent", "main", "--session", "s1", "--wait", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["counts"]["sessionsRecordedForgotten"] == 1
        again = run_cli(  # a request id, sent twice: the second is answered by the first run
            submit, "enqueue", "forget", "--agent", "main", "--session", "s2", "--request-id", "r-1"
        )
        assert again.returncode == 0, again.stderr
        same = run_cli(
            submit, "enqueue", "forget", "--agent", "main", "--session", "s2", "--request-id", "r-1", "--wait"
        )
        assert same.returncode == 0, same.stderr
        erase = run_cli(
            submit, "enqueue", "erase", "--scope", "tenant:default:user:u-gone", "--wait", "--json"
        )
        # An erasure across the deployment (its record, every host's job and result): it ran,
        # and found no such subject, which is what its receipt says.
        assert erase.returncode == 2 and "no host found anything this scope names" in erase.stderr
        jobs = run_cli(submit, "jobs", "--queue", "memoryd:queue:h1", "--json")
        assert jobs.returncode == 0, jobs.stderr
        status = run_cli(daemon.config, "status", "--json")  # the daemons' user reads everything
        assert status.returncode == 0 and json.loads(status.stdout)["daemon"]["redis"] == "ok", status.stdout
    finally:
        stop_cleanly(daemon)
    import anyio

    assert anyio.run(forgotten, settings, "main", "s1") and anyio.run(forgotten, settings, "main", "s2")


FORBIDDEN = [
    ("a route", lambda r: r.hset(AGENT_OWNER_KEY, "main", "memoryd:queue:evil")),
    ("a heartbeat", lambda r: r.hset(HEARTBEATS_KEY, "evil", "9999999999")),
    ("a host record", lambda r: r.hset(HOST_KEY.format(host="h1"), "pid", "1")),
    ("a result", lambda r: r.set("arq:result:forget:x", b'{"s":true}')),
    ("a lock", lambda r: r.set(LOCK_KEY.format(workspace="/w"), "token")),
    ("a fence", lambda r: r.incr(FENCE_KEY.format(workspace="/w"))),
    ("a queue, dropped", lambda r: r.delete("memoryd:queue:h1")),
    ("a job record, deleted", lambda r: r.delete("arq:job:forget:x")),
    ("another key", lambda r: r.set("other:key", "v")),
    ("everything", lambda r: r.flushdb()),
]


@pytest.mark.parametrize("what,write", FORBIDDEN, ids=[w for w, _ in FORBIDDEN])
def test_a_submitter_cannot_write_what_only_daemons_may(server, what, write):
    client = sync_redis.Redis.from_url(server.url(SUBMITTER))
    try:
        assert client.hgetall(AGENT_OWNER_KEY) == {}  # it may read routes
        with pytest.raises(NoPermissionError):
            write(client)
    finally:
        client.close()
    daemon = sync_redis.Redis.from_url(server.url(DAEMON))
    try:
        assert daemon.hset(HEARTBEATS_KEY, "h1", "1") == 1  # the daemons' user may
    finally:
        daemon.close()


async def test_the_password_file_overrides_the_url_and_a_missing_one_is_one_line(server, tmp_path):
    secret = tmp_path / "pass"
    secret.write_text(DAEMON[1] + "\n")
    wrong_in_url = server.url((DAEMON[0], "not-the-password"))
    settings = load_settings(None, redis_url=wrong_in_url, redis={"password_file": str(secret)})
    redis = await connect_redis(settings)
    await redis.aclose()
    missing = load_settings(None, redis_url=server.url(), redis={"password_file": str(tmp_path / "nope")})
    with pytest.raises(ConfigError) as err:
        await connect_redis(missing)
    assert (
        str(err.value)
        == f"redis.password_file {tmp_path / 'nope'}: cannot read it (No such file or directory)"
    )
