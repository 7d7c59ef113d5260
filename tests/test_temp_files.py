"""Temp files of atomic writes are an artifact kind (daemon/fileio.py): a process killed between
writing `.MEMORY.md.tmp-<pid>-<hex>` and its rename leaves the promoted lines there. The
verifier reads such a leftover; the next write of the file, every forget and erasure and the
daemon's start remove it; a temp that a live writer is still writing is never removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.failpoints import STOP_ENV_VAR, on_failpoint
from memoryd.fileio import (
    atomic_temp,
    commit_file,
    current_hash,
    is_leftover_temp,
    remove_leftover_temps_under,
    temp_name,
    temp_target,
)
from memoryd.retention.needles import VerifySubject
from memoryd.retention.verify import run_verify
from memoryd.settings import Settings, load_settings
from tests.builders import Msg, SessionStoreBuilder
from tests.daemon_harness import (
    DaemonProcess,
    FailpointTrace,
    NotifySocket,
    cleanup_redis,
    run_cli,
    start_cli,
    stop_cleanly,
    write_config,
)

NADIA_TEXT = "Remember that my locker code at the quarry gym is four seven nine two."
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."
MEMORY_STEP = "file.commit.memory"  # the failpoint between the temp's write and its rename


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except OSError:
        return 4_194_304  # the largest pid_max Linux allows


def _dead_pid() -> int:
    """A pid no process has: one past the largest the system hands out."""
    return _pid_max() + 1


# --- the name, and which temps are leftovers ------------------------------------------------------

target_names = st.text(
    st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=80
)


@given(target=target_names, pid=st.integers(1, 4_194_304), nonce=st.binary(min_size=4, max_size=4))
def test_every_temp_name_parses_back_to_its_target_and_writer(target: str, pid: int, nonce: bytes) -> None:
    assert temp_target(temp_name(target, pid, nonce.hex())) == (target, pid)


@pytest.mark.parametrize(
    "name",
    [
        "MEMORY.md",
        "notes.tmp-12",  # a user's file: not hidden
        "MEMORY.md.tmp-12-0a0b0c0d",  # not hidden
        ".MEMORY.md.tmp-12",  # no nonce
        ".MEMORY.md.tmp-12-0a0b0c0",  # a nonce too short
        ".MEMORY.md.tmp-12-0A0B0C0D",  # not lower-case hex
        ".MEMORY.md.tmp-0-0a0b0c0d",  # no process has pid 0
        ".MEMORY.md.tmp--12-0a0b0c0d",
        ".tmp-12-0a0b0c0d",  # no target
    ],
)
def test_names_of_another_form_are_not_temps(name: str) -> None:
    assert temp_target(name) is None and not is_leftover_temp(Path(name))


@dataclass(frozen=True)
class Planted:
    rel: str
    leftover: bool
    written_before_its_pid_started: bool = False


@st.composite
def planted_files(draw: st.DrawFn, live_pid: int) -> list[Planted]:
    """Files at random depths: temps of dead writers, of this process (not in flight), of a live
    other process (written since it started, or before: its pid was reused), and files whose
    names only look like temps."""
    out: list[Planted] = []
    for i in range(draw(st.integers(1, 12))):
        depth = draw(
            st.lists(st.sampled_from(["memory", ".dreams", "session-corpus", "x y", "é"]), max_size=3)
        )
        target = f"{i}-{draw(target_names)}"  # distinct for each file
        nonce = draw(st.binary(min_size=4, max_size=4)).hex()
        kind = draw(st.sampled_from(["dead", "this process", "live other", "reused pid", "look-alike"]))
        if kind == "dead":
            name, leftover = temp_name(target, draw(st.integers(_dead_pid(), 9_999_999_999)), nonce), True
        elif kind == "this process":
            name, leftover = temp_name(target, os.getpid(), nonce), True
        elif kind == "live other":
            name, leftover = temp_name(target, live_pid, nonce), False
        elif kind == "reused pid":
            out.append(Planted("/".join([*depth, temp_name(target, live_pid, nonce)]), True, True))
            continue
        else:
            name = draw(
                st.sampled_from(
                    [
                        f"{target}.tmp-{_dead_pid()}-{nonce}",  # not hidden
                        f".{target}.tmp-{_dead_pid()}",  # no nonce
                        f".{target}.tmp-{_dead_pid()}-{nonce[:6]}",  # a short nonce
                        f".{target}.tmp-{_dead_pid()}-{nonce}.md",  # something after it
                    ]
                )
            )
            leftover = False
        out.append(Planted("/".join([*depth, name]), leftover))
    return out


@pytest.fixture(scope="module")
def live_other_pid() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait(10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_only_the_temps_whose_writer_is_gone_are_removed_wherever_they_are(
    tmp_path_factory: pytest.TempPathFactory, live_other_pid: int, data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("ws")
    planted = data.draw(planted_files(live_other_pid))
    for p in planted:
        (root / p.rel).parent.mkdir(parents=True, exist_ok=True)
        (root / p.rel).write_text(NADIA_TEXT)
        if p.written_before_its_pid_started:
            os.utime(root / p.rel, (time.time() - 3600, time.time() - 3600))

    removed = remove_leftover_temps_under(root)

    left = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    gone = {p.rel for p in planted if p.leftover}
    assert left == {p.rel for p in planted} - gone and removed == len(gone)


def test_a_temp_of_this_process_in_flight_is_kept_and_the_write_commits(tmp_path: Path) -> None:
    memory = tmp_path / "MEMORY.md"
    seen: list[list[str]] = []

    def sweep_while_writing() -> None:
        remove_leftover_temps_under(tmp_path)
        seen.append([p.name for p in tmp_path.iterdir()])

    with on_failpoint(MEMORY_STEP, sweep_while_writing):
        commit_file(memory, NADIA_TEXT, expected_hash=None)

    assert len(seen) == 1 and len(seen[0]) == 1 and temp_target(seen[0][0]) == ("MEMORY.md", os.getpid())
    assert memory.read_text() == NADIA_TEXT and [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


def test_a_temp_of_this_process_whose_write_ended_is_a_leftover(tmp_path: Path) -> None:
    with atomic_temp(tmp_path / "MEMORY.md") as tmp:
        assert not is_leftover_temp(tmp)
    assert is_leftover_temp(tmp)  # the same name found later: a pid reused by a new process


# --- a real `memoryd dream` killed between the temp and its rename -------------------------------


@dataclass
class Crashed:
    config: Path
    settings: Settings
    memory: Path
    temp: Path


def _config(tmp_path: Path, redis_url: str, unique: str) -> tuple[Path, SessionStoreBuilder]:
    b = SessionStoreBuilder(tmp_path / "sessions", "main")
    for user, text in (("nadia", NADIA_TEXT), ("omar", OMAR_TEXT)):
        b.add(
            f"agent:main:dm:{user}",
            f"sess-{user}-1",
            [Msg("user", text), Msg("assistant", "Noted: " + text)],
            participants=[{"actorId": user}],
            chatType="direct",
        )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=b.root,
        redis_url=redis_url,
        host_id=f"h{unique}",
        extra="[dreaming]\nmin_score = 0\nmin_recall_count = 0\nmin_unique_queries = 0\n",
    )
    # The killed writer's lease lapses soon: the forget, erasure and verifier after it wait less.
    config.write_text(config.read_text().replace("[lock]\n", "[lock]\nttl_ms = 1500\n"))
    return config, b


async def _crash_dream(tmp_path: Path, redis_url: str, unique: str) -> Crashed:
    config, _ = _config(tmp_path, redis_url, unique)
    settings = load_settings(config)
    assert run_cli(config, "ingest", "--agent", "main").returncode == 0
    trace = FailpointTrace(tmp_path / "trace")
    dream = start_cli(config, "dream", "--agent", "main", env={**trace.env, STOP_ENV_VAR: MEMORY_STEP})
    try:
        await trace.wait_for(MEMORY_STEP, {dream.pid}, timeout_s=60)
    finally:
        dream.send_signal(signal.SIGKILL)  # it dies between writing the temp and its rename
        dream.wait(10)
    memory = settings.workspace_for("main") / "MEMORY.md"
    temps = list(memory.parent.glob(".MEMORY.md.tmp-*"))
    assert len(temps) == 1 and NADIA_TEXT in temps[0].read_text(), temps
    assert not memory.exists() or NADIA_TEXT not in memory.read_text()
    return Crashed(config, settings, memory, temps[0])


@pytest.fixture
async def crashed(tmp_path: Path, redis_url: str, unique: str) -> Crashed:
    try:
        yield await _crash_dream(tmp_path, redis_url, unique)
    finally:
        cleanup_redis(redis_url, [f"h{unique}"], ["main"])


@pytest.mark.slow
async def test_the_verifier_fails_while_a_crashed_writes_temp_holds_the_subjects_words(
    crashed, redis
) -> None:
    verification = await run_verify(
        crashed.settings, redis, VerifySubject(contents=(NADIA_TEXT,)), embedder=None, agents=["main"]
    )

    assert not verification.verified
    derivability = next(c for c in verification.checks if c.name == "derivability")
    assert derivability.status == "failed"
    assert any(crashed.temp.name in where for where in derivability.locations), derivability


def _next_write(c: Crashed) -> None:
    commit_file(c.memory, "# Memory\n", expected_hash=current_hash(c.memory))


def _forget(c: Crashed) -> None:
    done = run_cli(c.config, "forget", "--agent", "main", "--session", "sess-nadia-1")
    assert done.returncode == 0, done.stderr


def _erase(c: Crashed) -> None:
    done = run_cli(c.config, "erase", "--scope", "tenant:default:user:nadia", "--json")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["state"] == "complete" and receipt["verification"]["verified"] is True, receipt


def _daemon_start(c: Crashed) -> None:
    tmp = c.config.parent
    notify = NotifySocket(tmp / "notify.sock")
    daemon = DaemonProcess(c.config, notify, tmp / "daemon.log").start()
    try:
        notify.wait_for("READY=1", timeout_s=60)
    finally:
        notify.close()
        stop_cleanly(daemon)


@pytest.mark.slow
@pytest.mark.parametrize(
    "remover", [_next_write, _forget, _erase, _daemon_start], ids=lambda f: f.__name__[1:]
)
async def test_a_crashed_writes_temp_is_removed_by(crashed, remover) -> None:
    remover(crashed)

    assert not crashed.temp.exists()
    assert not list(crashed.memory.parent.glob(".MEMORY.md.tmp-*"))


@pytest.mark.slow
async def test_a_temp_another_live_process_is_writing_is_kept_and_its_write_commits(
    tmp_path: Path, redis_url: str, unique: str
) -> None:
    config, _ = _config(tmp_path, redis_url, unique)
    settings = load_settings(config)
    try:
        assert run_cli(config, "ingest", "--agent", "main").returncode == 0
        trace = FailpointTrace(tmp_path / "trace")
        dream = start_cli(config, "dream", "--agent", "main", env={**trace.env, STOP_ENV_VAR: MEMORY_STEP})
        try:
            await trace.wait_for(MEMORY_STEP, {dream.pid}, timeout_s=60)
            workspace = settings.workspace_for("main")
            temps = list(workspace.glob(".MEMORY.md.tmp-*"))
            assert len(temps) == 1

            assert remove_leftover_temps_under(workspace) == 0  # the writer is alive (stopped)

            assert temps[0].exists()
        finally:
            dream.send_signal(signal.SIGCONT)
            _out, err = dream.communicate(timeout=60)
        assert dream.returncode == 0, err
        assert NADIA_TEXT in (workspace / "MEMORY.md").read_text()
        assert not list(workspace.glob(".MEMORY.md.tmp-*"))
    finally:
        cleanup_redis(redis_url, [f"h{unique}"], ["main"])
