"""What ships in systemd/ and deploy/: the unit passes systemd-analyze, the alert rules and the
dashboard only name metrics (and labels) the daemon exports, and deploy/redis.conf's ACL lets
memoryd do everything it does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.runtime import metrics
from tests import redis_servers
from tests.daemon_harness import REPO

UNIT = REPO / "systemd" / "memoryd.service"
ALERTS = REPO / "deploy" / "alerts.yml"
DASHBOARD = REPO / "deploy" / "grafana-dashboard.json"
# Labels Prometheus itself adds to every scraped series.
TARGET_LABELS = {"job", "instance"}


def _unit_options() -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            options.setdefault(key.strip(), []).append(value.strip())
    return options


def test_unit_is_a_hardened_notify_service_without_root():
    o = _unit_options()
    assert o["Type"] == ["notify"]
    assert o["Restart"] == ["on-failure"]
    assert o["WatchdogSec"] and o["StateDirectory"] == ["memoryd"]
    assert o["ProtectSystem"] == ["strict"]
    assert o["User"] == ["memoryd"] and "root" not in o.get("Group", [])
    assert o["NoNewPrivileges"] == ["yes"] and o["CapabilityBoundingSet"] == [""]
    for key in (
        "PrivateTmp",
        "PrivateDevices",
        "ProtectKernelTunables",
        "ProtectKernelModules",
        "ProtectControlGroups",
        "RestrictNamespaces",
        "RestrictSUIDSGID",
        "MemoryDenyWriteExecute",
    ):
        assert o[key] == ["yes"], key
    assert "@system-service" in o["SystemCallFilter"]
    assert o["ExecReload"] == ["/bin/kill -HUP $MAINPID"]


def test_unit_caps_memory_and_tasks_and_says_why():
    o = _unit_options()
    assert o["MemoryMax"] == ["1G"] and o["TasksMax"] == ["512"]
    lines = UNIT.read_text().splitlines()
    first = min(i for i, line in enumerate(lines) if line.startswith(("MemoryMax=", "TasksMax=")))
    assert lines[first - 1].startswith("#"), "the limits need a comment saying why"
    doc = (REPO / "deploy" / "systemd.md").read_text()
    assert "`MemoryMax=`" in doc and "`TasksMax=`" in doc


def test_every_hardening_option_of_the_unit_is_documented():
    doc = (REPO / "deploy" / "systemd.md").read_text()
    hardening = UNIT.read_text().split("# Hardening", 1)[1].split("[Install]")[0]
    keys = {
        line.split("=", 1)[0] for line in hardening.splitlines() if "=" in line and not line.startswith("#")
    }
    missing = sorted(k for k in keys if f"`{k}=" not in doc and f"{k}=" not in doc)
    assert missing == []


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path):
    # verify checks that ExecStart= exists; point it at an executable this machine has.
    unit = tmp_path / "memoryd.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/memoryd", sys.executable))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # Unknown keys or bad values are only warnings; they must not be there either.
    assert "memoryd.service" not in out.stderr, out.stderr


def _families() -> dict[str, tuple[set[str], set[str]]]:
    """Every sample name the registry can expose → (metric type, label names)."""
    names: dict[str, tuple[set[str], set[str]]] = {}
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    for collector in list(metrics.REGISTRY._collector_to_names):  # every registered metric
        family = collector._name  # type: ignore[attr-defined]
        labels = set(collector._labelnames)  # type: ignore[attr-defined]
        for suffix in suffixes[collector._type]:  # type: ignore[attr-defined]
            names[family + suffix] = ({collector._type}, labels | ({"le"} if suffix == "_bucket" else set()))  # type: ignore[attr-defined]
    return names


def _expressions() -> list[str]:
    alerts = re.findall(r"^\s*expr:\s*(.+)$", ALERTS.read_text(), re.M)
    dash = json.loads(DASHBOARD.read_text())
    panels = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert alerts and panels
    return alerts + panels


def test_every_metric_named_by_alerts_and_dashboard_is_exported():
    exported = _families()
    named = {m for expr in _expressions() for m in re.findall(r"\bmemoryd_[a-z_]+", expr)}
    assert named, "no memoryd metric found in the rules"
    assert sorted(named - exported.keys()) == []
    # The panels and alerts are all there.
    for needed in (
        "memoryd_ingest_lag_sessions",
        "memoryd_sessions_excluded",
        "memoryd_jobs_by_state",
        "memoryd_purges_total",
        "memoryd_purged_artifacts_total",
        "memoryd_lock_wait_seconds_bucket",
        "memoryd_redis_up",
        "memoryd_last_sweep_success_timestamp_seconds",
    ):
        assert needed in named, needed


def test_every_label_the_rules_select_or_group_by_exists_on_the_metric():
    exported = _families()
    problems = []
    for expr in _expressions():
        for metric, selector in re.findall(r"\b(memoryd_[a-z_]+)\{([^}]*)\}", expr):
            for label in re.findall(r"(\w+)\s*=~?", selector):
                if label not in exported[metric][1]:
                    problems.append(f"{metric}{{{label}}}")
        grouped = re.findall(r"by \(([^)]*)\)\s*\(([^()]*\(?\s*(memoryd_[a-z_]+))", expr)
        for labels, _, metric in grouped:
            for label in (x.strip() for x in labels.split(",")):
                if label not in exported[metric][1] | TARGET_LABELS:
                    problems.append(f"{metric} by {label}")
    assert problems == []


def test_no_metric_label_collides_with_prometheus_target_labels():
    assert all(not (labels & TARGET_LABELS) for _, labels in _families().values())


@pytest.fixture
def production_redis(tmp_path: Path):
    """redis-server started with deploy/redis.conf as shipped (port and dir moved for the test)."""
    with redis_servers.production_redis(tmp_path / "redis") as server:
        yield server.url(redis_servers.DAEMON_USER)


async def test_the_acl_of_deploy_redis_conf_allows_everything_memoryd_does(
    production_redis, tmp_path, unique
):
    from memoryd.forget.request import ForgetRequest
    from memoryd.runtime.client import MemorydClient
    from memoryd.runtime.service import Service
    from memoryd.runtime.status import collect_status
    from memoryd.runtime.wire import queue_name
    from memoryd.settings import load_settings
    from tests.builders import Msg, SessionStoreBuilder
    from tests.worker_harness import run_jobs

    agent = f"a{unique}"
    SessionStoreBuilder(tmp_path / "sessions", agent).add(
        "k1", "s1", [Msg("user", "remember the harbour rota")]
    )
    settings = load_settings(
        None,
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=production_redis,
        daemon={"host_id": f"h{unique}", "metrics_listen": None},
    )
    service = Service(settings, None)
    await service.start()  # ping, routing and host record
    await service._publish()
    try:
        async with MemorydClient.connect(settings) as client:
            job = await client.enqueue_forget(ForgetRequest(agent=agent, sessions=["s1"]))
            await run_jobs(
                settings, queue_name(settings.daemon.host_id), frozenset({agent})
            )  # lock, Lua, store
            report = await client.wait(job.job_id, timeout_s=10)
            assert report.state == "complete", report.error
            assert [j.job_id for j in await client.list_jobs(queue_name(settings.daemon.host_id))] == [
                job.job_id
            ]
        status = await collect_status(settings)
        assert status.daemon.redis == "ok" and status.agents[0].queue == queue_name(settings.daemon.host_id)
    finally:
        assert service.pool is not None
        await service.pool.aclose(close_connection_pool=True)


def test_unit_keeps_proc_stat_so_the_process_metrics_are_exported():
    # ProcSubset=pid hides /proc/stat, which prometheus_client's process collector reads: every
    # process_* metric (resident memory, the one to watch against MemoryMax=) vanished.
    assert _unit_options().get("ProcSubset", ["all"]) != ["pid"]
    doc = (REPO / "deploy" / "systemd.md").read_text()
    assert "ProcSubset=" in doc and "/proc/stat" in doc


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_security_rates_the_unit_ok(tmp_path: Path):
    unit = tmp_path / "memoryd.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/memoryd", sys.executable))
    out = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    rating = re.search(r"Overall exposure level for memoryd\.service: ([0-9.]+)", out.stdout + out.stderr)
    assert rating is not None, out.stdout + out.stderr
    assert float(rating.group(1)) <= 2.0, rating.group(0)


def test_the_units_documentation_is_a_file_the_install_steps_install():
    documented = _unit_options()["Documentation"]
    steps = (REPO / "deploy" / "systemd.md").read_text()
    for uri in documented:
        assert uri.startswith("file://"), uri
        path = uri.removeprefix("file://")
        assert re.search(rf"^install .* {re.escape(path)}\b", steps, re.M), (
            f"{path}: not installed by deploy/systemd.md"
        )
