"""A small, realistic example session store and a config that points at it (`memoryd demo init`).

It has what memoryd is built to handle, so every feature can be tried without an agent:
two agents; direct chats on several channels; group chats with several participants;
gmail, IMAP email and webhook hook sessions; cron runs; a reset archive. The config keeps
gmail out by admission policy, so the first sweep shows an exclusion reason.

Layout written under DIR:

    DIR/memoryd.toml
    DIR/sessions/agents/<agent>/sessions/sessions.json + <sessionId>.jsonl (+ archives)
    DIR/state/                      (created by memoryd on first use)

The transcripts are written with daemon/sessions/transcript_writer.py, the one pi v3 writer
(memoryd itself never writes an agent's transcript).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from memoryd.errors import UsageError
from memoryd.fileio import commit_file
from memoryd.redaction import redact_url
from memoryd.sessions.transcript_writer import Turn, encode_lines, transcript

DAY_MS = 86_400_000
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True)
class DemoSession:
    key: str
    session_id: str
    turns: tuple[tuple[str, str], ...]  # (role, text); role "user" is the owner unless `speaker:` prefixed
    meta: dict[str, Any] = field(default_factory=dict)
    archive_turns: tuple[tuple[str, str], ...] = ()  # an earlier generation kept as a reset archive
    owner: bool = True  # user turns are the operator's own (senderIsOwner), not a contact's


def _p(actor: str, ns: str = "profile") -> dict[str, str]:
    return {"actorId": actor, "namespace": json.dumps({"type": ns})}


DEMO_AGENTS: dict[str, tuple[DemoSession, ...]] = {
    "main": (
        DemoSession(
            "agent:main:telegram:direct:nora",
            "tg-nora-0001",
            (
                ("user", "Remember that my flight to Lisbon leaves on March 3 at 07:40 from gate B12."),
                ("assistant", "Noted: your Lisbon flight leaves March 3 at 07:40 from gate B12."),
                ("user", "I am allergic to peanuts, so please flag any restaurant booking that serves them."),
                ("assistant", "I will flag peanut dishes on every restaurant booking from now on."),
                ("user", "My sister Ana lives in Porto; her birthday is on April 18."),
                ("assistant", "Got it: Ana lives in Porto and her birthday is April 18."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "direct",
                "channel": "telegram",
                "participants": [_p("nora")],
                "origin": {"provider": "telegram", "from": "nora"},
            },
            archive_turns=(
                ("user", "Old thread: remind me to renew the passport before February."),
                ("assistant", "I will remind you to renew the passport before February."),
            ),
        ),
        DemoSession(
            "agent:main:signal:direct:omar",
            "sig-omar-0001",
            (
                ("user", "Omar here. The orchard project budget is capped at 40k euros for this quarter."),
                ("assistant", "Understood, the orchard project budget cap is 40k euros this quarter."),
                ("user", "Please remember that I prefer calls after 15:00 on weekdays."),
                ("assistant", "Noted: calls with you after 15:00 on weekdays."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "direct",
                "channel": "signal",
                "participants": [_p("omar")],
                "origin": {"provider": "signal", "from": "omar"},
            },
            owner=False,
        ),
        DemoSession(
            "agent:main:slack:group:launch-room",
            "slack-launch-0001",
            (
                (
                    "user",
                    "nora: The lighthouse launch moves to May 12; marketing needs the final copy by May 5.",
                ),
                ("assistant", "Recorded: lighthouse launch on May 12, final copy due May 5."),
                ("user", "omar: Staging freeze starts May 8, no deploys after 18:00 that day."),
                ("assistant", "Recorded: staging freeze from May 8, no deploys after 18:00."),
                ("user", "lena: I own the release checklist and the rollback runbook for the launch."),
                ("assistant", "Lena owns the release checklist and the rollback runbook."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "group",
                "channel": "slack",
                "participants": [_p("nora"), _p("omar"), _p("lena")],
            },
        ),
        DemoSession(
            "hook:gmail:inv-2291",
            "gmail-inv-2291",
            (
                (
                    "user",
                    "Invoice 2291 from Harbour Supplies: 1,240 euros due on the 30th for the orchard order.",
                ),
                ("assistant", "Logged invoice 2291 from Harbour Supplies, 1,240 euros due on the 30th."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "direct",
                "hookExternalContentSource": "gmail",
                "participants": [_p("billing@harbour.example", "observation")],
                "origin": {"provider": "gmail", "from": "billing@harbour.example"},
            },
        ),
        DemoSession(
            "hook:email:newsletter-77",
            "imap-news-0077",
            (
                (
                    "user",
                    "Newsletter: the city marathon closes the river road on Sunday between 08:00 and 13:00.",
                ),
                ("assistant", "Noted the river road closure on Sunday from 08:00 to 13:00."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "direct",
                "hookExternalContentSource": "email",
                "participants": [_p("news@city.example", "observation")],
            },
        ),
        DemoSession(
            "hook:webhook:ci-build-512",
            "hook-ci-0512",
            (
                (
                    "user",
                    "Build 512 of the lighthouse service failed: integration test checkout_flow timed out.",
                ),
                ("assistant", "Recorded: build 512 failed in checkout_flow with a timeout."),
            ),
            {"sessionKind": "interactive", "hookExternalContentSource": "webhook"},
        ),
        DemoSession(
            "agent:main:cron:daily-digest:run:41",
            "cron-digest-0041",
            (
                ("user", "Run the daily digest for today's calendar and unread messages."),
                (
                    "assistant",
                    "Digest: two meetings today, the orchard review at 10:00 and a dentist visit at 16:30.",
                ),
            ),
            {"sessionKind": "cron", "createdVia": "cron"},
        ),
    ),
    "ops": (
        DemoSession(
            "agent:ops:matrix:direct:lena",
            "mx-lena-0001",
            (
                ("user", "The backup bucket for the billing database is rotated every Sunday at 02:00 UTC."),
                ("assistant", "Noted: billing database backups rotate every Sunday at 02:00 UTC."),
                ("user", "On-call this month is Ravi; escalate to Lena after 30 minutes without an answer."),
                ("assistant", "Ravi is on call this month; escalation to Lena after 30 minutes."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "direct",
                "channel": "matrix",
                "participants": [_p("lena")],
            },
        ),
        DemoSession(
            "agent:ops:matrix:group:incident-room",
            "mx-incident-0007",
            (
                ("user", "ravi: Incident 7 root cause was an expired TLS certificate on the edge proxy."),
                ("assistant", "Incident 7: root cause was the expired TLS certificate on the edge proxy."),
                ("user", "nora: Add certificate expiry checks to the weekly review from now on."),
                ("assistant", "Added certificate expiry checks to the weekly review."),
            ),
            {
                "sessionKind": "interactive",
                "chatType": "group",
                "channel": "matrix",
                "participants": [_p("ravi"), _p("nora")],
            },
        ),
        DemoSession(
            "hook:webhook:uptime-88",
            "hook-uptime-0088",
            (
                ("user", "Uptime alert: the status page returned 503 for four minutes at 03:12 UTC."),
                ("assistant", "Logged the 503 on the status page at 03:12 UTC, four minutes."),
            ),
            {"sessionKind": "interactive", "hookExternalContentSource": "webhook"},
        ),
        DemoSession(
            "agent:ops:cron:backup-check:run:9",
            "cron-backup-0009",
            (
                ("user", "Check last night's backups and report anything missing."),
                ("assistant", "All nine backups completed; the largest was the billing database at 41 GB."),
            ),
            {"sessionKind": "cron", "createdVia": "cron"},
        ),
    ),
}


class DemoAgent(BaseModel):
    agent: str
    sessions: int
    archives: int
    sessions_dir: str = Field(serialization_alias="sessionsDir")


class DemoReport(BaseModel):
    directory: str
    config: str = Field(description="The config file to pass as --config.")
    sessions_root: str = Field(serialization_alias="sessionsRoot")
    state_dir: str = Field(serialization_alias="stateDir")
    redis_url: str = Field(serialization_alias="redisUrl")
    agents: list[DemoAgent]
    excluded_hook_sources: list[str] = Field(serialization_alias="excludedHookSources")
    state_reset: bool = Field(
        default=False,
        serialization_alias="stateReset",
        description="--force removed the state memoryd kept of an earlier example here.",
    )


def _transcript(sid: str, turns: tuple[tuple[str, str], ...], start_ms: int, owner: bool = True) -> bytes:
    out: list[Turn] = []
    for i, (role, text) in enumerate(turns):
        # Owner turns are the operator's own words; a prefixed speaker in a group is someone else.
        own = owner and role == "user" and ":" not in text.split(" ", 1)[0]
        out.append(Turn(role, text, start_ms + i * 45_000, meta={"senderIsOwner": True} if own else {}))
    return encode_lines(transcript(sid, out))


CONFIG_HEADER = "# memoryd config for the example store written by `memoryd demo init`."


def config_text(directory: Path, redis_url: str) -> str:
    return (
        CONFIG_HEADER + "\n"
        "# Every key is documented in config/memoryd.example.toml.\n"
        f"state_dir = {json.dumps(str(directory / 'state'))}\n"
        f"sessions_root = {json.dumps(str(directory / 'sessions'))}\n"
        f"redis_url = {json.dumps(redis_url)}\n"
        "\n"
        "[memory_policy.exclude_sessions]\n"
        "# Gmail hook sessions stay out of memory; the first sweep records the reason.\n"
        'hook_external_content_sources = ["gmail"]\n'
        "\n"
        "[ingest]\ninterval_s = 30.0\n"
        "\n"
        "[index]\ninterval_s = 30.0\n"
        "# Transcripts are indexed too, so search finds what the example chats said.\n"
        'sources = ["memory", "sessions"]\n'
        "\n"
        "[dreaming]\ninterval_s = 120.0\n"
        "\n"
        '[daemon]\nhost_id = "demo"\nmetrics_listen = "127.0.0.1:9464"\n'
    )


def _reset_example(directory: Path, config: Path) -> bool:
    """Before a forced rewrite of an example: remove its sessions and the state memoryd kept of
    them, so the tour starts again from nothing. Only under a config this command wrote (a
    directory that merely holds a memoryd.toml keeps its state). True if state was removed."""
    try:
        ours = config.read_text(encoding="utf-8").startswith(CONFIG_HEADER)
    except (FileNotFoundError, UnicodeDecodeError):
        ours = False
    if not ours:
        return False
    shutil.rmtree(directory / "sessions", ignore_errors=True)
    state = directory / "state"
    existed = state.exists()
    shutil.rmtree(state, ignore_errors=True)
    return existed


def write_demo(
    directory: Path, *, redis_url: str = DEFAULT_REDIS_URL, force: bool = False, now_ms: int | None = None
) -> DemoReport:
    """Write the example store and its config under `directory`; refuse to overwrite unless `force`."""
    directory = directory.expanduser().resolve()
    config = directory / "memoryd.toml"
    sessions_root = directory / "sessions"
    if not force and (config.exists() or (sessions_root / "agents").exists()):
        raise UsageError(
            f"{directory}: already holds a memoryd.toml or a session store; "
            "pick an empty directory or pass --force to rewrite the example"
        )
    state_reset = force and _reset_example(directory, config)
    directory.mkdir(parents=True, exist_ok=True)

    def write(path: Path, data: bytes) -> None:
        # Atomic, 0600, no symlinks followed below `directory`; no hash check: these are new files.
        commit_file(path, data, expected_hash=None, root=directory)

    # Yesterday, so the sessions fall inside every default lookback window.
    base = (now_ms if now_ms is not None else int(time.time() * 1000)) // DAY_MS * DAY_MS - DAY_MS
    agents: list[DemoAgent] = []
    for agent, sessions in DEMO_AGENTS.items():
        sdir = sessions_root / "agents" / agent / "sessions"
        sdir.mkdir(parents=True, exist_ok=True)
        store: dict[str, dict[str, Any]] = {}
        archives = 0
        for n, s in enumerate(sessions):
            start = base + n * 3_600_000
            store[s.key] = {
                "sessionId": s.session_id,
                "createdAt": start,
                "updatedAt": start + len(s.turns) * 45_000,
                **s.meta,
            }
            write(sdir / f"{s.session_id}.jsonl", _transcript(s.session_id, s.turns, start, s.owner))
            if s.archive_turns:
                archives += 1
                stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime((start - DAY_MS) / 1000))
                write(
                    sdir / f"{s.session_id}.jsonl.reset.{stamp}.000Z",
                    _transcript(s.session_id, s.archive_turns, start - DAY_MS, s.owner),
                )
        write(sdir / "sessions.json", (json.dumps(store, indent=2) + "\n").encode())
        agents.append(DemoAgent(agent=agent, sessions=len(store), archives=archives, sessions_dir=str(sdir)))
    write(config, config_text(directory, redis_url).encode())
    return DemoReport(
        directory=str(directory),
        config=str(config),
        sessions_root=str(sessions_root),
        state_dir=str(directory / "state"),
        redis_url=redact_url(redis_url),  # the report is printed: no password in it
        agents=agents,
        excluded_hook_sources=["gmail"],
        state_reset=state_reset,
    )
