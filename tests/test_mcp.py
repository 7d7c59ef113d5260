"""`memoryd mcp` through the SDK's own client, in real protocol sessions with the real command:
over stdio (search, get, read, write, bad arguments) and streamable HTTP (a token refused or
required); forget through a running daemon's job queue."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memoryd.agent_runtime import agent_runtime
from tests.daemon_harness import REPO, DaemonProcess, NotifySocket, cleanup_redis, stop_cleanly, write_config
from tests.recall_world import AGENT, ANN_DIRECT, BEN_DIRECT, GROUP, build_world, ingest_and_index

TOOLS = {"memory_search", "memory_get", "memory_forget", "memory_read", "memory_write"}


async def _config(tmp_path: Path, sessions_root: Path, unique: str, redis, extra: str = "") -> Path:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await ingest_and_index(rt)
    return write_config(
        tmp_path / "memoryd.toml",
        state_dir=settings.state_dir,
        sessions_root=sessions_root,
        redis_url=settings.redis_url,
        host_id=f"test-{unique}",
        extra=f'[agents.{AGENT}]\nworkspace = "{tmp_path / "ws"}"\n[index]\nsources = ["memory", "sessions"]\n'
        + extra,
    )


def _stdio(config: Path, *args: str) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable,
            args=["-m", "memoryd.cli", "--config", str(config), "mcp", "--agent", AGENT, *args],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=str(REPO),
        )
    )


def _error(result: Any) -> str:
    assert result.is_error, result
    [content] = result.content
    assert "\n" not in content.text and "Traceback" not in content.text
    return content.text


async def test_search_get_read_and_write_over_stdio_with_provenance_and_scoping(
    tmp_path, sessions_root, unique, redis
) -> None:
    config = await _config(tmp_path, sessions_root, unique, redis)
    async with _stdio(config) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        assert "participant" in listed["memory_search"].input_schema["properties"]
        assert "withheld" in listed["memory_search"].output_schema["properties"]

        found = await client.call_tool("memory_search", {"query": "quince", "participant": "ben"})
        assert not found.is_error
        report = found.structured_content
        assert report["results"] == [] and report["withheld"] >= 2 and report["participant"] == "ben"

        found = await client.call_tool("memory_search", {"query": "marigold quince", "participant": "ann"})
        hits = {h["key"]: h for h in found.structured_content["results"]}
        merged = hits["memory:merged"]
        assert "quince-free food" in merged["snippet"]
        assert {s["sessionId"] for s in merged["sessions"]} == {ANN_DIRECT, GROUP}
        assert all(s["sessionKey"] and s["observedAt"] for s in merged["sessions"])

        got = await client.call_tool("memory_get", {"key": "memory:merged", "participant": "ann"})
        assert got.structured_content["text"].endswith("quince-free food for Ann.")
        assert len(got.structured_content["sessions"]) == 2
        # The same key asked for by the other user reads as unknown: never "withheld".
        assert "no memory" in _error(
            await client.call_tool("memory_get", {"key": "memory:merged", "participant": "ben"})
        )

        wrote = await client.call_tool(
            "memory_write",
            {"scope": "tenant:default:user:ann", "content": "Ann likes window seats.", "participant": "ann"},
        )
        assert not wrote.is_error, wrote
        read = await client.call_tool(
            "memory_read", {"scope": "tenant:default:user:ann", "participant": "ann"}
        )
        assert [o["content"] for o in read.structured_content["objects"]] == ["Ann likes window seats."]
        assert "not under user:ben" in _error(
            await client.call_tool("memory_read", {"scope": "tenant:default:user:ann", "participant": "ben"})
        )


async def test_bad_arguments_get_one_clear_line_each(tmp_path, sessions_root, unique, redis) -> None:
    config = await _config(tmp_path, sessions_root, unique, redis)
    cases = [
        ("memory_search", {"query": "quince"}, "memory_search: participant: recall.scope is 'participant'"),
        ("memory_search", {"query": "", "participant": "ann"}, "memory_search: query:"),
        ("memory_search", {"query": "x", "limit": 0, "participant": "ann"}, "memory_search: limit:"),
        ("memory_search", {"query": "x", "colour": "red", "participant": "ann"}, "colour: unknown field"),
        ("memory_get", {"key": "x" * 300, "participant": "ann"}, "memory_get: key:"),
        ("memory_forget", {"participant": "ann"}, "memory_forget: give exactly one of key or session"),
        (
            "memory_forget",
            {"key": "memory:walnut", "participant": "ann"},
            "not memory of sessions 'ann' took",
        ),
        (
            "memory_forget",
            {"key": "memory:orphan", "participant": "ann"},
            "not memory of sessions 'ann' took",
        ),
        ("memory_forget", {"key": "chunk:abc", "participant": "ann"}, "is a piece of a transcript"),
        ("memory_forget", {"key": "memory:nope", "participant": "ann"}, "key: no memory 'memory:nope' here"),
        ("memory_forget", {"session": BEN_DIRECT, "participant": "ann"}, "not a session 'ann' took part in"),
        ("memory_forget", {"session": "../x", "participant": "ann"}, "memory_forget: sessions"),
        ("memory_read", {"scope": "nonsense", "participant": "ann"}, "memory_read: scope:"),
        (
            "memory_write",
            {"scope": "tenant:default:user:ann", "participant": "ann"},
            "memory_write: content:",
        ),
        ("memory_recall", {}, "memory_recall: no such tool"),
    ]
    async with _stdio(config) as client:
        for tool, args, expected in cases:
            text = _error(await client.call_tool(tool, args))
            assert expected in text, (tool, args, text)
    async with _stdio(config, "--participant", "ann") as client:
        refused = _error(await client.call_tool("memory_search", {"query": "x", "participant": "ben"}))
        assert "recalls for 'ann' only" in refused
        assert not (await client.call_tool("memory_search", {"query": "quince"})).is_error


def _start_http(config: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryd.cli",
            "--config",
            str(config),
            "mcp",
            "--agent",
            AGENT,
            "--http",
            *args,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "listening on" in line, line
    return proc, line.rsplit(" ", 1)[1].strip()


async def test_http_on_loopback_serves_the_tools_and_a_token_is_required_elsewhere(
    tmp_path, sessions_root, unique, redis
) -> None:
    config = await _config(tmp_path, sessions_root, unique, redis)
    base = [sys.executable, "-m", "memoryd.cli", "--config", str(config), "mcp", "--agent", AGENT, "--http"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    refused = await anyio.run_process([*base, "--listen", "0.0.0.0:0"], cwd=REPO, env=env, check=False)
    assert refused.returncode == 2, refused
    said = refused.stderr.decode()
    assert "not a loopback address: give --token-file" in said
    assert len(said.strip().splitlines()) == 1 and "Traceback" not in said

    proc, url = _start_http(config, "--listen", "127.0.0.1:0")
    try:
        async with Client(url) as client:
            found = await client.call_tool("memory_search", {"query": "walnut", "participant": "ben"})
            assert any(h["key"] == "memory:walnut" for h in found.structured_content["results"])
    finally:
        proc.terminate()
        proc.wait(10)

    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-for-memoryd-tests\n")
    token_file.chmod(0o644)
    loose = await anyio.run_process(
        [*base, "--listen", "0.0.0.0:0", "--token-file", str(token_file)], cwd=REPO, env=env, check=False
    )
    assert loose.returncode == 2 and "chmod 600" in loose.stderr.decode()
    token_file.chmod(0o600)
    proc, url = _start_http(config, "--listen", "0.0.0.0:0", "--token-file", str(token_file))
    url = url.replace("0.0.0.0", "127.0.0.1")
    try:
        async with httpx2.AsyncClient() as http:
            missing = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert missing.status_code == 401 and "bearer token" in missing.text
        with_token = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token-for-memoryd-tests"})
        async with Client(streamable_http_client(url, http_client=with_token)) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        wrong = httpx2.AsyncClient(headers={"Authorization": "Bearer wrong"})
        with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a 401
            async with Client(streamable_http_client(url, http_client=wrong)) as client:
                await client.list_tools()
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
async def test_forget_goes_through_the_daemons_queue_and_the_memory_is_gone(
    tmp_path, sessions_root, unique, redis, redis_url
) -> None:
    config = await _config(tmp_path, sessions_root, unique, redis)
    host = f"test-{unique}"
    notify = NotifySocket(tmp_path / "notify.sock")
    daemon = DaemonProcess(config, notify, tmp_path / "daemon.log").start()
    try:
        notify.wait_for("READY=1")
        async with _stdio(config) as client:
            # One memory by the key a hit gave: that entry goes, the rest of Ann's stays.
            hits = await client.call_tool("memory_search", {"query": "quince allergy", "participant": "ann"})
            keys = {h["key"] for h in hits.structured_content["results"]}
            assert "memory:quince" in keys, keys
            gone = await client.call_tool("memory_forget", {"key": "memory:quince", "participant": "ann"})
            assert not gone.is_error, gone
            again = await client.call_tool("memory_search", {"query": "quince allergy", "participant": "ann"})
            assert "memory:quince" not in {h["key"] for h in again.structured_content["results"]}
            memory_md = (tmp_path / "ws" / "MEMORY.md").read_text()
            assert "memory:quince" not in memory_md and "memory:merged" in memory_md
            preview = await client.call_tool(
                "memory_forget", {"session": BEN_DIRECT, "dry_run": True, "participant": "ben"}
            )
            assert not preview.is_error, preview
            assert preview.structured_content["dryRun"] is True
            done = await client.call_tool("memory_forget", {"session": BEN_DIRECT, "participant": "ben"})
            assert not done.is_error, done
            # A job's stored result names no session (its lists are emptied in Redis): counts.
            assert done.structured_content["counts"]["sessionsRecordedForgotten"] == 1
            after = await client.call_tool("memory_search", {"query": "walnut savings", "participant": "ben"})
            assert after.structured_content["results"] == []

        stop_cleanly(daemon)
    finally:
        daemon.kill()
        notify.close()
        cleanup_redis(redis_url, [host], [AGENT])
