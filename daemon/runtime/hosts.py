"""Which memoryd hosts are alive: each daemon's record in Redis (`memoryd:host:<id>`), whose
heartbeat it refreshes every few seconds. Pure reading of those records; the service writes them."""

from __future__ import annotations

import os
from dataclasses import dataclass

from daemon.constants import HOST_KEY_TTL_S

LIVE_STATES = ("running", "draining")


@dataclass(frozen=True, slots=True)
class HostRecord:
    host_id: str
    pid: int | None
    machine: str | None  # the OS host name the daemon runs on
    state: str
    heartbeat: float | None  # Unix seconds

    def silent_s(self, now: float) -> float | None:
        return None if self.heartbeat is None else max(0.0, now - self.heartbeat)

    def alive(self, now: float) -> bool:
        silent = self.silent_s(now)
        return self.state in LIVE_STATES and silent is not None and silent <= HOST_KEY_TTL_S


def parse_host_record(host_id: str, raw: dict[bytes, bytes]) -> HostRecord | None:
    if not raw:
        return None
    fields = {k.decode(): v.decode() for k, v in raw.items()}

    def number(name: str) -> float | None:
        try:
            return float(fields[name])
        except (KeyError, ValueError):
            return None

    pid = number("pid")
    return HostRecord(
        host_id=host_id,
        pid=None if pid is None else int(pid),
        machine=fields.get("machine") or None,
        state=fields.get("state", ""),
        heartbeat=number("heartbeat"),
    )


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def other_daemon(record: HostRecord | None, now: float, machine: str, pid: int) -> HostRecord | None:
    """The live daemon that already runs as this host id, if one does. A record left by a
    daemon of this machine whose process is gone (SIGKILL, a crash) is not one: its
    successor need not wait for the heartbeat to go stale."""
    if record is None or not record.alive(now):
        return None
    if record.machine == machine and (record.pid == pid or record.pid is None or not _pid_exists(record.pid)):
        return None
    return record
