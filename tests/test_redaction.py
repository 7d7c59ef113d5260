"""Secrets never printed (issue 18, finding 10): a Redis password and the userinfo of the
embedding and consolidation `base_url`s appear in no output of `config check` (human and
JSON), `status`, a refused `run`, a failing index job, `demo init` or a failing model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.dreaming.consolidation import ConsolidationRejected, call_model
from memoryd.redaction import redact_text, redact_url
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import run_cli, write_config
from tests.local_http import JsonEndpoint

REDIS_PW, EMBED_PW, MODEL_PW = "redisPw7731x", "embedPw5520y", "modelPw9104z"

# What a URL may carry unescaped in a password (RFC 3986 unreserved and sub-delims, less the
# quote text puts around a URL) plus percent escapes.
secrets_ = st.text(
    alphabet=st.sampled_from("abcXYZ019-._~!$()*+,%"),
    min_size=6,
    max_size=20,
)


@settings(max_examples=300, deadline=None)
@given(
    secret=secrets_,
    user=st.sampled_from(["", "bob", "default"]),
    form=st.sampled_from(["userinfo", "password", "api_key", "access_token"]),
    scheme=st.sampled_from(["redis", "rediss", "http", "https"]),
)
def test_no_secret_survives_redaction_in_a_url_or_in_text_naming_it(secret, user, form, scheme):
    if form == "userinfo":
        url = (
            f"{scheme}://{user}:{secret}@127.0.0.1:6380/v1"
            if user
            else f"{scheme}://{secret}@127.0.0.1:6380/v1"
        )
    else:
        url = f"{scheme}://127.0.0.1:6380/v1?db=1&{form}={secret}&x=y"
    for shown in (redact_url(url), redact_text(f"Client error '401' for url '{url}/chat'")):
        assert secret not in shown.replace("127.0.0.1:6380", "")
        assert "127.0.0.1:6380" in shown


def _outputs(*runs) -> str:
    return "\n".join(r.stdout + r.stderr for r in runs)


@pytest.mark.slow  # CLI processes
def test_config_check_status_run_and_index_never_print_a_password(
    tmp_path: Path, redis_url: str, unique: str
):
    root = tmp_path / "sessions"
    SessionStoreBuilder(root, "main").add("agent:main:main", "s-one", exchange("orchard"), chatType="direct")
    with JsonEndpoint(lambda request: (401, {"error": "unauthorized"})) as endpoint:
        host_port = endpoint.url.split("://", 1)[1]
        urls = (
            f'[index]\nsources = ["memory", "sessions"]\n\n[index.embedding]\nprovider = "openai"\n'
            f'base_url = "http://bob:{EMBED_PW}@{host_port}"\nmax_retries = 0\n\n'
            f'[dreaming.consolidation]\nbase_url = "https://carol:{MODEL_PW}@{host_port}"\n'
        )
        good = write_config(
            tmp_path / "good.toml",
            state_dir=tmp_path / "state",
            sessions_root=root,
            redis_url=redis_url,
            host_id=f"h{unique}",
            extra=urls,
        )
        # A Redis URL with a password the server refuses (or does not expect).
        bad_redis = redis_url.replace("redis://", f"redis://memoryd:{REDIS_PW}@")
        bad = write_config(
            tmp_path / "bad.toml",
            state_dir=tmp_path / "state",
            sessions_root=root,
            redis_url=bad_redis,
            host_id=f"h{unique}",
            extra=urls,
        )
        runs = [
            run_cli(good, "config", "check"),
            run_cli(good, "config", "check", "--json"),
            run_cli(bad, "config", "check"),
            run_cli(bad, "config", "check", "--json"),
            run_cli(bad, "status"),
            run_cli(bad, "status", "--json"),
            run_cli(bad, "run", timeout=60),
            run_cli(good, "ingest", "--agent", "main"),
            run_cli(good, "index", "--agent", "main"),
            run_cli(good, "index", "--agent", "main", "--json"),
            run_cli(good, "demo", "init", str(tmp_path / "demo"), "--redis-url", bad_redis),
            run_cli(good, "demo", "init", str(tmp_path / "demo2"), "--redis-url", bad_redis, "--json"),
        ]
        assert endpoint.requests, "the embedding endpoint was never called"
    shown = _outputs(*runs)
    for secret in (REDIS_PW, EMBED_PW, MODEL_PW):
        assert secret not in shown, secret
    checked = json.loads(runs[1].stdout)
    assert checked["index"]["embedding"]["base_url"] == f"http://bob:***@{host_port}"
    assert "memoryd:***@" in runs[2].stdout
    assert runs[8].returncode == 1 and "embedding endpoint http://bob:***@" in runs[8].stderr


async def test_a_failing_model_call_names_its_endpoint_without_the_password(
    tmp_path: Path, sessions_root: Path
):
    with JsonEndpoint(lambda request: (401, {"error": "unauthorized"})) as endpoint:
        host_port = endpoint.url.split("://", 1)[1]
        s = load_settings(
            None,
            state_dir=tmp_path / "state",
            sessions_root=sessions_root,
            dreaming={"consolidation": {"base_url": f"http://carol:{MODEL_PW}@{host_port}"}},
        )
        with pytest.raises(ConsolidationRejected) as caught:
            await call_model(s.dreaming, [{"role": "user", "content": "hi"}])
    assert MODEL_PW not in str(caught.value) and "carol:***@" in str(caught.value)
