"""The peer agent's sessions, planned (pure, deterministic for a seed): what OpenClaw's own
writers are then asked to write (bench/peer/writer.mjs).

* direct chats with the owner (Ada) on telegram, slack or discord;
* group chats of 2-3 participants from a pool of 19, only Ada's turns owner-flagged;
* gmail hook sessions (`hook:gmail:<message id>`): external mail (not the owner: untrusted,
  index-only) or mail Ada forwarded (owner: backfill stages it);
* log-normal message lengths (median ~260 chars) in Zipf text, with a remembered fact in
  some turns, spread over DAYS days.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench.corpus import _Text

AGENT = "peer"
DAY_MS = 86_400_000
BASE_MS = 1_777_939_200_000  # 2026-05-05 00:00 UTC: every session is in the past
DAYS = 60
OWNER = ("telegram", "tg:1001")
CHANNELS = ("telegram", "slack", "discord")
# The pool of other people: (channel, id); 18 of them, 19 participants with the owner.
OTHERS = tuple((CHANNELS[i % 3], f"{CHANNELS[i % 3][:2]}:{2000 + i}") for i in range(18))
FACTS = (
    "Remember that the deploy window moves to Friday at noon.",
    "The invoice for the {w} project is due on the 14th.",
    "Nora prefers the {w} report before the team meeting.",
    "Remember: the {w} schedule changes every Tuesday.",
    "The lighthouse rota for {w} starts next week.",
)


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # user | assistant
    text: str
    ts: int
    sender: tuple[str, str] | None = None  # (channel, id) of a user turn
    owner: bool = False


@dataclass(frozen=True, slots=True)
class SessionPlan:
    key: str  # lower case, as OpenClaw canonicalises it
    session_id: str
    kind: str  # direct | group | gmail
    started: int
    channel: str | None
    participants: tuple[tuple[str, str], ...]  # (channel, id), recorded once a turn is admitted
    turns: tuple[Turn, ...] = field(default=())

    @property
    def hook_source(self) -> str | None:
        return "gmail" if self.kind == "gmail" else None


def _identity(sender: tuple[str, str]) -> dict[str, Any]:
    channel, actor = sender
    return {
        "type": "observation",
        "pluginId": channel,
        "accountId": "default",
        "senderKind": "human",
        "id": actor,
    }


def plan_agent(n: int, seed: int = 21) -> list[SessionPlan]:
    rng = random.Random(seed)
    text = _Text(random.Random(seed + 1))
    plans: list[SessionPlan] = []
    for i in range(n):
        started = BASE_MS + (i * DAYS * DAY_MS) // max(n, 1) + rng.randrange(3_600_000)
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        roll = rng.random()
        if roll < 0.12:
            plans.append(_gmail(i, sid, started, rng, text))
        elif roll < 0.45:
            plans.append(_group(i, sid, started, rng, text))
        else:
            plans.append(_direct(i, sid, started, rng, text))
    return plans


def _say(rng: random.Random, text: _Text) -> str:
    if rng.random() < 0.3:
        return rng.choice(FACTS).format(w=rng.choice(text.words[20:400]))
    return text.message()


def _turns(
    speakers: list[tuple[str, str]], started: int, rng: random.Random, text: _Text, owner_ok: bool = True
) -> tuple[Turn, ...]:
    turns: list[Turn] = []
    ts = started
    count = max(len(speakers), rng.randint(3, 14))
    order = [*rng.sample(speakers, len(speakers)), *rng.choices(speakers, k=count - len(speakers))]
    for sender in order:  # everyone in the chat speaks at least once
        ts += rng.randint(20_000, 600_000)
        turns.append(Turn("user", _say(rng, text), ts, sender, owner_ok and sender == OWNER))
        ts += rng.randint(2_000, 30_000)
        turns.append(Turn("assistant", text.message(), ts))
    return tuple(turns)


def _direct(i: int, sid: str, started: int, rng: random.Random, text: _Text) -> SessionPlan:
    channel = rng.choice(CHANNELS)
    turns = _turns([OWNER], started, rng, text)
    return SessionPlan(
        f"agent:{AGENT}:{channel}:direct:ada-{i}", sid, "direct", started, channel, (OWNER,), turns
    )


def _group(i: int, sid: str, started: int, rng: random.Random, text: _Text) -> SessionPlan:
    channel = rng.choice(CHANNELS)
    others = rng.sample([o for o in OTHERS if o[0] == channel], rng.randint(1, 2))
    speakers = [OWNER, *others]
    turns = _turns(speakers, started, rng, text)
    spoke = tuple(dict.fromkeys(t.sender for t in turns if t.sender is not None))
    group = f"g{i % 40:02d}"
    return SessionPlan(
        f"agent:{AGENT}:{channel}:group:{group}-{i}", sid, "group", started, channel, spoke, turns
    )


def _gmail(i: int, sid: str, started: int, rng: random.Random, text: _Text) -> SessionPlan:
    forwarded = rng.random() < 0.5  # Ada forwarded it: owner turns; else external mail
    turns = _turns([OWNER], started, rng, text, owner_ok=forwarded)
    return SessionPlan(f"agent:{AGENT}:hook:gmail:msg-{i:05x}", sid, "gmail", started, None, (), turns)


def entry(plan: SessionPlan) -> dict[str, Any]:
    """The SessionEntry upsertSessionEntry is given."""
    last = plan.turns[-1].ts if plan.turns else plan.started
    out: dict[str, Any] = {
        "sessionId": plan.session_id,
        "updatedAt": last,
        "sessionStartedAt": plan.started,
        "lastInteractionAt": last,
        "label": f"peer-{plan.kind}",
    }
    if plan.kind == "gmail":
        out["hookExternalContentSource"] = "gmail"
        out["delivery"] = {"kind": "internal"}
        return out
    chat_type = "group" if plan.kind == "group" else "direct"
    to = plan.key.rsplit(":", 1)[-1]
    out["chatType"] = chat_type
    out["delivery"] = {
        "kind": "external",
        "route": {
            "channel": plan.channel,
            "accountId": "default",
            "target": {"to": to, "chatType": chat_type},
        },
        "context": {"channel": plan.channel, "to": to, "accountId": "default"},
        "origin": {
            "provider": plan.channel,
            "surface": plan.channel,
            "chatType": chat_type,
            "to": to,
            "accountId": "default",
        },
    }
    return out


def message(turn: Turn) -> dict[str, Any]:
    """The message appendSessionTranscriptMessageByIdentity is given."""
    content = [{"type": "text", "text": turn.text}]
    if turn.role == "assistant":
        usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        return {
            "role": "assistant",
            "content": content,
            "api": "openai-responses",
            "provider": "synthetic",
            "model": "none",
            "usage": {**usage, "cost": {**{k: 0 for k in usage if k != "totalTokens"}, "total": 0}},
            "stopReason": "stop",
            "timestamp": turn.ts,
        }
    assert turn.sender is not None
    meta: dict[str, Any] = {"senderId": turn.sender[1], "senderIdentity": _identity(turn.sender)}
    if turn.owner:
        meta["senderIsOwner"] = True
    return {"role": "user", "content": content, "timestamp": turn.ts, "__openclaw": meta}


def writer_spec(plans: list[SessionPlan]) -> dict[str, Any]:
    """The JSON the writer script reads: per session its key, entry, messages, participants."""
    return {
        "agentId": AGENT,
        "sessions": [
            {
                "sessionKey": p.key,
                "sessionId": p.session_id,
                "entry": entry(p),
                "messages": [message(t) for t in p.turns],
                "participants": [
                    {"identity": _identity(s), "promptedAt": next(t.ts for t in p.turns if t.sender == s)}
                    for s in p.participants
                ],
            }
            for p in plans
        ],
    }


@dataclass(frozen=True, slots=True)
class PlannedView:
    """What both sides must list of the written agent."""

    sessions: tuple[str, ...]
    participants: dict[str, list[str]]  # session id -> participant ids, sorted
    gmail: frozenset[str]  # the gmail hook sessions


def expected(plans: list[SessionPlan]) -> PlannedView:
    return PlannedView(
        tuple(sorted(p.session_id for p in plans)),
        {p.session_id: sorted(s[1] for s in p.participants) for p in plans},
        frozenset(p.session_id for p in plans if p.hook_source == "gmail"),
    )
