"""Which memoryd hosts are alive: each daemon's record in Redis (`memoryd:host:<id>`), whose
heartbeat it refreshes every few seconds, and the agents' routes they claim. Reading those
records is pure; the service writes them, its routes through `CLAIM_ROUTES` only."""

from __future__ import annotations

import os
from dataclasses import dataclass

from daemon.constants import HOST_KEY_TTL_S, QUEUE_PREFIX

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


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A host's entry in `memoryd:heartbeats`: when it last beat, and whether it stopped."""

    host_id: str
    at: float | None  # Unix seconds; None: the host never beat (or predates heartbeats)
    stopped: bool

    def alive(self, now: float) -> bool:
        return not self.stopped and self.at is not None and now - self.at <= HOST_KEY_TTL_S

    def silence(self, now: float) -> str:
        """Why the host is not alive, for a one-line refusal."""
        if self.at is None:
            return f"its host {self.host_id!r} has never sent a heartbeat"
        ago = f"{now - self.at:.0f} s ago" if now - self.at < 120 else f"{(now - self.at) / 60:.0f} min ago"
        if self.stopped:
            return f"its host {self.host_id!r} stopped {ago}"
        return f"its host {self.host_id!r} has been silent for {ago.removesuffix(' ago')}"


def parse_heartbeat(host_id: str, raw: bytes | str | None) -> Heartbeat:
    text = raw.decode() if isinstance(raw, bytes) else raw
    if not text:
        return Heartbeat(host_id, None, False)
    stopped = text.startswith("stopped ")
    try:
        at = float(text.removeprefix("stopped "))
    except ValueError:
        return Heartbeat(host_id, None, False)
    return Heartbeat(host_id, at, stopped)


def heartbeat_value(now: float, *, stopped: bool = False) -> str:
    return f"stopped {now:.3f}" if stopped else f"{now:.3f}"


def host_of_queue(queue: str) -> str:
    return queue.removeprefix(QUEUE_PREFIX)


# Claims `agent -> queue` routes in `memoryd:agents` for one host, in one atomic step, and
# beats that host's heartbeat in the same step: two daemons starting together cannot both read
# "nobody serves it" and both claim, because whichever runs second sees the first's claim and
# live heartbeat. A route held by another host that is alive (the rule of `Heartbeat.alive`) is
# left alone and returned; a route of a stopped or silent host is taken over.
# KEYS: the routes hash, the heartbeats hash. ARGV: own queue, own host id, own heartbeat value,
# now (Unix s), heartbeat TTL (s), queue prefix, then the agents. Returns [agent, host, ...].
CLAIM_ROUTES = """
local queue, host, beat = ARGV[1], ARGV[2], ARGV[3]
local now, ttl, prefix = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local taken = {}
for i = 7, #ARGV do
  local agent = ARGV[i]
  local owner = redis.call('HGET', KEYS[1], agent)
  local alive = false
  if owner and owner ~= queue then
    local other = owner
    if string.sub(owner, 1, #prefix) == prefix then other = string.sub(owner, #prefix + 1) end
    local seen = redis.call('HGET', KEYS[2], other)
    local at = seen and tonumber(seen)  -- nil for "stopped <t>"
    if at and now - at <= ttl then
      alive = true
      table.insert(taken, agent)
      table.insert(taken, other)
    end
  end
  if not alive then redis.call('HSET', KEYS[1], agent, queue) end
end
redis.call('HSET', KEYS[2], host, beat)
return taken
"""


def taken_routes(reply: list[bytes]) -> dict[str, str]:
    """`CLAIM_ROUTES`' reply as agent -> the live host that keeps its route."""
    return {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
