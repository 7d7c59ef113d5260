"""Which memoryd hosts are alive: each daemon's record in Redis (`memoryd:host:<id>`), whose
heartbeat it refreshes every few seconds, and the agents' routes they claim (`Route`: the
host's queue, its deployment and the agent's store). Reading those records is pure; the
service writes them, its routes through `CLAIM_ROUTES` only."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import orjson

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY, HOST_KEY_TTL_S, QUEUE_PREFIX

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


@dataclass(frozen=True, slots=True)
class Route:
    """An agent's route in `memoryd:agents`: the queue of the host that serves it, the deployment
    that host belongs to (`daemon.deployment_id`) and the id of the store it serves the agent
    from (store_meta `store_id`). A route without the last two was written by an older memoryd
    (its value a bare queue name): it belongs to no deployment anyone can check."""

    queue: str
    deployment: str | None
    store: str | None

    @property
    def host(self) -> str:
        return host_of_queue(self.queue)


def route_value(queue: str, deployment: str, store: str) -> str:
    """A route as stored: JSON, so the claim script (cjson) and other tools read it alike."""
    return orjson.dumps({"queue": queue, "deployment": deployment, "store": store}).decode()


def parse_route(raw: bytes | str | None) -> Route | None:
    """None when there is no route, or its value is neither a route nor a bare queue name."""
    if raw is None:
        return None
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if not text.startswith("{"):
        return Route(text, None, None) if text.startswith(QUEUE_PREFIX) else None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(value.get(k), str) for k in ("queue", "deployment", "store")
    ):
        return None
    return Route(value["queue"], value["deployment"], value["store"])


# Why a claim left an agent's route as it was (CLAIM_ROUTES' reply).
ALIVE = "alive"  # another host that is alive holds it
OTHER_DEPLOYMENT = "deployment"  # a host of another deployment holds it (alive or not)
OTHER_STORE = "store"  # a host of this deployment that served another store of the agent
UNREADABLE = "unreadable"  # its value is no route


@dataclass(frozen=True, slots=True)
class KeptRoute:
    """A route a claim did not take: whose it is, and why it stays."""

    host: str
    reason: str
    deployment: str | None


# Claims `agent -> route` in `memoryd:agents` for one host, in one atomic step, and beats that
# host's heartbeat in the same step: two daemons starting together cannot both read "nobody
# serves it" and both claim, because whichever runs second sees the first's claim and live
# heartbeat. A route is taken only when it is free, this host's own (of this deployment, or of
# this store), or held by a host of this deployment that is not alive (the rule of
# `Heartbeat.alive`) and served the same store: another deployment's route is never taken, and
# an agent moves between hosts only with its store. When `held` (the agents this host serves
# now), a route another deployment's host wrote over it is taken back: no claim ever takes a
# served agent's route into another deployment, so such a route was written by hand.
# KEYS: the routes hash, the heartbeats hash. ARGV: own queue, own host id, own heartbeat value,
# now (Unix s), heartbeat TTL (s), queue prefix, own deployment, held (1/0), then pairs of agent
# and its store id ("" when its store did not open: such a route takes no other host's over). Returns [agent, host, reason, deployment, ...] for each route left alone.
CLAIM_ROUTES = """
local queue, host, beat = ARGV[1], ARGV[2], ARGV[3]
local now, ttl, prefix = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local deployment, held = ARGV[7], ARGV[8] == '1'
local kept = {}
for i = 9, #ARGV, 2 do
  local agent, store = ARGV[i], ARGV[i + 1]
  local raw = redis.call('HGET', KEYS[1], agent)
  local claim, why, owner, other_deployment = true, '', '', ''
  if raw then
    local route = nil
    if string.sub(raw, 1, 1) == '{' then
      local ok, value = pcall(cjson.decode, raw)
      if ok and type(value) == 'table' and type(value.queue) == 'string'
          and type(value.deployment) == 'string' and type(value.store) == 'string' then
        route = value
      end
    elseif string.sub(raw, 1, #prefix) == prefix then
      route = {queue = raw}  -- an older memoryd's bare queue name
    end
    if route == nil then
      claim, why = held, 'unreadable'
    else
      owner = route.queue
      if string.sub(owner, 1, #prefix) == prefix then owner = string.sub(owner, #prefix + 1) end
      other_deployment = route.deployment or ''
      local mine = route.deployment == deployment
      local seen = redis.call('HGET', KEYS[2], owner)
      local at = seen and tonumber(seen)  -- nil for "stopped <t>"
      local alive = route.queue ~= queue and at ~= nil and now - at <= ttl
      if route.queue == queue then
        -- this host's own: of this deployment, or (a renamed deployment) of this very store
        if route.deployment and not mine and route.store ~= store then claim, why = false, 'deployment' end
      elseif route.deployment == nil then
        claim, why = false, 'deployment'  -- an older memoryd's: nobody can tell its deployment
      elseif not mine then
        claim, why = held, 'deployment'
      elseif alive then
        claim, why = false, 'alive'
      elseif route.store ~= store or store == '' then
        claim, why = held, 'store'
      end
    end
  end
  if claim then
    redis.call('HSET', KEYS[1], agent, cjson.encode({queue = queue, deployment = deployment, store = store}))
  else
    table.insert(kept, agent)
    table.insert(kept, owner)
    table.insert(kept, why)
    table.insert(kept, other_deployment)
  end
end
redis.call('HSET', KEYS[2], host, beat)
return kept
"""


async def claim_routes(
    redis: Any,
    *,
    queue: str,
    host: str,
    beat: str,
    now_s: float,
    deployment: str,
    held: bool,
    stores: dict[str, str],
) -> dict[str, KeptRoute]:
    """Run CLAIM_ROUTES for `stores` (agent -> its store's id, "" when it has none yet) with the
    heartbeat value `beat`, atomically; the routes it left alone (agent -> whose, and why).
    `held`: the agents are served here now, so another deployment's host never holds them."""
    reply = await redis.eval(
        CLAIM_ROUTES,
        2,
        AGENT_OWNER_KEY,
        HEARTBEATS_KEY,
        queue,
        host,
        beat,
        f"{now_s:.3f}",
        HOST_KEY_TTL_S,
        QUEUE_PREFIX,
        deployment,
        "1" if held else "0",
        *[x for pair in stores.items() for x in pair],
    )
    return kept_routes(reply)


def kept_routes(reply: list[bytes]) -> dict[str, KeptRoute]:
    """`CLAIM_ROUTES`' reply as agent -> the route it left alone, and why."""
    out: dict[str, KeptRoute] = {}
    for i in range(0, len(reply), 4):
        deployment = reply[i + 3].decode(errors="replace")
        out[reply[i].decode()] = KeptRoute(
            reply[i + 1].decode(errors="replace"), reply[i + 2].decode(), deployment or None
        )
    return out
