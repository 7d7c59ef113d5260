"""Failpoints: an armed step fails, a callback hears each step reached, a trace file records
them across processes (names and pids only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.failpoints import ENV_VAR, TRACE_ENV_VAR, FailpointTriggered, failpoint, on_failpoint
from tests.daemon_harness import REPO


def test_a_callback_hears_its_step_while_registered_and_before_an_armed_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[str] = []
    with on_failpoint("demo.step", lambda: heard.append("step")):
        failpoint("demo.other")
        failpoint("demo.step")
        monkeypatch.setenv(ENV_VAR, "demo.step")
        with pytest.raises(FailpointTriggered, match="demo.step"):
            failpoint("demo.step")
    failpoint("demo.other")
    monkeypatch.delenv(ENV_VAR)
    failpoint("demo.step")
    assert heard == ["step", "step"]


def test_the_trace_records_each_step_reached_with_its_process(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    code = "from memoryd.failpoints import failpoint; failpoint('demo.a'); failpoint('demo.b')"
    env = {**os.environ, "PYTHONPATH": str(REPO), TRACE_ENV_VAR: str(trace)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(2)]
    pids = {str(p.pid) for p in procs}
    assert [p.wait(30) for p in procs] == [0, 0]
    lines = sorted(trace.read_text().splitlines())
    assert sorted(line.split()[1] for line in lines) == sorted([*pids, *pids])
    assert sorted(line.split()[0] for line in lines) == ["demo.a", "demo.a", "demo.b", "demo.b"]
    assert oct(trace.stat().st_mode & 0o777) == "0o600"
