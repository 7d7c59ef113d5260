"""`redis_url` with AUTH, an ACL username and TLS, against private redis-server children (never
the shared server): the connection, the workspace lock and the job client work through them,
and a wrong credential is a one-line error that names the URL without its password."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from redis.asyncio import Redis

from memoryd.errors import OperationFailed
from memoryd.lock import WorkspaceLock
from memoryd.ops import forget as forget_op
from memoryd.redis_conn import connect_redis
from memoryd.runtime.client import MemorydClient
from memoryd.settings import load_settings
from tools.chaos import PrivateRedis

FORGET = forget_op.OP.contract.name

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
PASSWORD = "s3cret-pass-word"


async def connect_redis_at(url: str) -> Redis:
    return await connect_redis(load_settings(None, redis_url=url))


@pytest.fixture
def acl_server(tmp_path):
    """Default user off; `memoryd` may use only the keys and commands it needs."""
    server = PrivateRedis(
        tmp_path / "acl",
        extra_args=(
            "--user",
            "default",
            "off",
            "--user",
            "memoryd",
            "on",
            f">{PASSWORD}",
            "~memoryd:*",
            "~arq:*",
            "&*",
            "+@all",
            "-@admin",
            "-@dangerous",
            "--user",
            "memoryd-ro",
            "on",
            f">{PASSWORD}",
            "~*",
            "+@read",
        ),
        cli_args=("--user", "admin-none", "--pass", "x"),
    ).start()
    yield server
    server.proc.kill()  # its own child: the default user is off, so `shutdown` cannot be sent
    server.proc.wait(5)


@pytest.fixture
def auth_server(tmp_path):
    server = PrivateRedis(
        tmp_path / "auth",
        extra_args=("--requirepass", PASSWORD),
        cli_args=("-a", PASSWORD, "--no-auth-warning"),
    ).start()
    yield server
    server.stop()


def _url(server: PrivateRedis, creds: str) -> str:
    return f"redis://{creds}@127.0.0.1:{server.port}/0"


async def test_an_acl_user_with_only_memoryd_keys_can_hold_the_lock_and_enqueue(acl_server, tmp_path):
    url = _url(acl_server, f"memoryd:{PASSWORD}")
    redis = await connect_redis_at(url)
    try:
        lock = WorkspaceLock(redis, tmp_path / "ws", wait_s=1)
        async with lock.hold() as lease:
            assert lease.fence_value > 0 and await lock.holder_info() is not None
        assert await lock.holder_info() is None
    finally:
        await redis.aclose()
    settings = load_settings(None, state_dir=tmp_path / "state", redis_url=url)
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue(FORGET, {"agent": "main", "sessions": ["s1"]}, queue="memoryd:queue:h")
        assert (await client.job(job.job_id)).state == "queued"


@pytest.mark.parametrize(
    "creds", [f"memoryd:wrong-{PASSWORD}", f"nobody:{PASSWORD}", f"memoryd-ro:{PASSWORD}"]
)
async def test_a_refused_acl_login_or_a_read_only_user_is_a_clear_error(acl_server, tmp_path, creds):
    url = _url(acl_server, creds)  # a wrong password, an unknown user, a user without PING
    with pytest.raises(OperationFailed) as err:
        await connect_redis_at(url)
    message = str(err.value)
    assert f"127.0.0.1:{acl_server.port}" in message and PASSWORD not in message and "\n" not in message


async def test_requirepass_auth_with_a_password_only_url(auth_server):
    redis = await connect_redis_at(_url(auth_server, f":{PASSWORD}"))
    try:
        assert await redis.ping()
    finally:
        await redis.aclose()
    with pytest.raises(OperationFailed) as err:
        await connect_redis_at(f"redis://127.0.0.1:{auth_server.port}/0")  # no password
    assert PASSWORD not in str(err.value)


def _tls_files(d: Path) -> dict[str, Path]:
    d.mkdir(parents=True)
    files = {k: d / f"{k}.pem" for k in ("ca", "ca-key", "cert", "key")}
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=60)  # noqa: E731
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=memoryd-test-ca",
        "-keyout",
        str(files["ca-key"]),
        "-out",
        str(files["ca"]),
    )
    csr = d / "server.csr"
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        str(files["key"]),
        "-out",
        str(csr),
    )
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(files["ca"]),
        "-CAkey",
        str(files["ca-key"]),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(ext),
        "-out",
        str(files["cert"]),
    )
    return files


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a test CA")
@pytest.mark.slow
async def test_rediss_urls_verify_the_server_certificate_and_carry_acl_credentials(tmp_path):
    tls = _tls_files(tmp_path / "tls")
    port = PrivateRedis(tmp_path / "x").port
    server = PrivateRedis(
        tmp_path / "tls-server",
        port=port,
        extra_args=(
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(tls["cert"]),
            "--tls-key-file",
            str(tls["key"]),
            "--tls-ca-cert-file",
            str(tls["ca"]),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            PASSWORD,
        ),
    )
    # `--port 0` after ours: the plain port is off, only TLS listens on `port`.
    try:
        server.start()
    except RuntimeError:
        pytest.skip("this redis-server was built without TLS")
    try:
        url = (
            f"rediss://default:{PASSWORD}@127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={tls['ca']}"
        )
        redis = await connect_redis_at(url)
        try:
            async with WorkspaceLock(redis, tmp_path / "ws", wait_s=1).hold() as lease:
                assert lease.fence_value > 0
        finally:
            await redis.aclose()
        # A certificate from an unknown CA is refused, and the message hides the password.
        other = _tls_files(tmp_path / "other")
        with pytest.raises(OperationFailed) as err:
            await connect_redis_at(url.replace(str(tls["ca"]), str(other["ca"])))
        assert PASSWORD not in str(err.value)
        with pytest.raises(OperationFailed):
            await connect_redis_at(
                f"redis://default:{PASSWORD}@127.0.0.1:{port}/0"
            )  # plain text to a TLS port
    finally:
        server.proc.kill()
        server.proc.wait(5)


@pytest.mark.slow
def test_a_daemon_whose_acl_user_cannot_register_refuses_to_start_with_one_line(tmp_path):
    """Found by tools/chaos.py (Redis restarting between the start-up probe and the host's
    registration) and reproduced here with an ACL user that may PING but not write: `memoryd run`
    died with a traceback instead of its one-line refusal."""
    import os
    import sys

    from tests.daemon_harness import REPO, write_config

    server = PrivateRedis(
        tmp_path / "ping-only",
        extra_args=(
            "--user",
            "default",
            "off",
            "--user",
            "pinger",
            "on",
            f">{PASSWORD}",
            "~*",
            "+ping",
            "+hello",
            "+client",
        ),
    ).start()
    try:
        config = write_config(
            tmp_path / "memoryd.toml",
            state_dir=tmp_path / "state",
            sessions_root=tmp_path / "sessions",
            redis_url=_url(server, f"pinger:{PASSWORD}"),
            host_id="ping-only",
        )
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("NOTIFY_SOCKET", None)
        done = subprocess.run(
            [sys.executable, "-m", "memoryd.cli", "--config", str(config), "run"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.proc.kill()
        server.proc.wait(5)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("memoryd: error:")]
    assert "cannot publish this host" in line and PASSWORD not in done.stderr


async def test_a_lease_whose_fence_cannot_be_drawn_fails_as_a_redis_outage(tmp_path):
    """Found by tools/chaos.py: Redis went away between taking the lease and drawing its fence,
    and the forget failed with a raw `ConnectionError` (not a memoryd error). Reproduced with an
    ACL user that may SET and GET but not run scripts."""
    server = PrivateRedis(
        tmp_path / "no-scripts",
        extra_args=(
            "--user",
            "default",
            "off",
            "--user",
            "noscript",
            "on",
            f">{PASSWORD}",
            "~*",
            "+@all",
            "-@scripting",
        ),
    ).start()
    try:
        redis = await connect_redis_at(_url(server, f"noscript:{PASSWORD}"))
        try:
            lock = WorkspaceLock(redis, tmp_path / "ws", wait_s=1)
            with pytest.raises(OperationFailed, match="workspace lock: Redis unavailable"):
                async with lock.hold():
                    pass
        finally:
            await redis.aclose()
    finally:
        server.proc.kill()
        server.proc.wait(5)
