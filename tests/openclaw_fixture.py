"""Builds OpenClaw agent databases (`agents/<agent>/agent/openclaw-agent.sqlite`) with the DDL
documented in the reference page openclaw-session-store.md, written the way OpenClaw's own
writers write them: `upsert_entry` (session rows), `append` (transcript events) and
`add_participant` (participant rows)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import zstandard

from memoryd.sessions.transcript_writer import message_line, session_header
from memoryd.store.db import sqlite3
from tests.builders import DAY_MS, Msg

EVENT_TIME = "2026-11-29T18:57:58.203Z"  # the events' own ISO time (readers prefer the message's)

# The tables a reader needs, as observed (reference page). `conversations` is not read; it is
# declared only because session_windows has a foreign key to it.
DDL = r"""
CREATE TABLE conversations (conversation_id TEXT NOT NULL PRIMARY KEY) STRICT;

CREATE TABLE session_nodes (
  session_key TEXT NOT NULL PRIMARY KEY,
  current_session_id TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  legacy_acp_migration_json TEXT,
  entry_valid INTEGER NOT NULL DEFAULT 0 CHECK (entry_valid IN (-1, 0, 1)),
  updated_at INTEGER NOT NULL,
  status TEXT CHECK (status IS NULL OR status IN ('running', 'done', 'failed', 'killed', 'timeout')),
  created_at INTEGER,
  created_via TEXT CHECK (created_via IS NULL OR created_via IN ('operator', 'spawn', 'channel', 'cron', 'talk', 'run', 'plugin', 'internal')),
  created_actor_type TEXT CHECK (created_actor_type IS NULL OR created_actor_type IN ('human', 'agent', 'system')),
  created_actor_id TEXT,
  owner_actor_type TEXT,
  owner_actor_id TEXT,
  owner_assigned_by_type TEXT,
  owner_assigned_by_id TEXT,
  owner_assigned_at INTEGER,
  project_id TEXT,
  parent_session_key TEXT,
  spawned_by TEXT,
  fork_source_session_key TEXT,
  fork_source_session_id TEXT,
  fork_source_entry_id TEXT,
  label TEXT,
  display_name TEXT,
  category TEXT,
  icon TEXT,
  pinned_at INTEGER,
  archived_at INTEGER,
  last_read_at INTEGER,
  last_interaction_at INTEGER,
  last_activity_at INTEGER
) STRICT;

CREATE TABLE session_participants (
  session_key TEXT NOT NULL,
  identity_namespace TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  contribution_count INTEGER NOT NULL,
  first_prompted_at INTEGER,
  last_prompted_at INTEGER,
  PRIMARY KEY (session_key, identity_namespace, actor_id),
  FOREIGN KEY (session_key) REFERENCES session_nodes(session_key) ON DELETE CASCADE
) STRICT;

CREATE TABLE session_windows (
  session_id TEXT NOT NULL PRIMARY KEY,
  session_key TEXT NOT NULL,
  previous_session_id TEXT,
  reason TEXT CHECK (reason IS NULL OR reason IN ('initial', 'reset', 'rollover', 'fork', 'rewind', 'switch', 'recovery', 'compaction')),
  session_scope TEXT NOT NULL DEFAULT 'conversation' CHECK (session_scope IN ('conversation', 'shared-main', 'group', 'channel')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  transcript_updated_at INTEGER DEFAULT NULL,
  transcript_observed_at INTEGER DEFAULT NULL,
  session_entry_provenance INTEGER NOT NULL DEFAULT 0 CHECK (session_entry_provenance IN (0, 1)),
  acp_owned INTEGER NOT NULL DEFAULT 0 CHECK (acp_owned IN (0, 1)),
  plugin_owner_id TEXT,
  hook_external_content_source TEXT CHECK (hook_external_content_source IS NULL OR hook_external_content_source IN ('gmail', 'webhook')),
  started_at INTEGER,
  ended_at INTEGER,
  status TEXT CHECK (status IS NULL OR status IN ('running', 'done', 'failed', 'killed', 'timeout')),
  chat_type TEXT CHECK (chat_type IS NULL OR chat_type IN ('direct', 'group', 'channel')),
  channel TEXT,
  account_id TEXT,
  primary_conversation_id TEXT,
  model_provider TEXT,
  model TEXT,
  agent_harness_id TEXT,
  parent_session_key TEXT,
  spawned_by TEXT,
  display_name TEXT,
  FOREIGN KEY (session_key) REFERENCES session_nodes(session_key) ON DELETE CASCADE,
  FOREIGN KEY (primary_conversation_id) REFERENCES conversations(conversation_id) ON DELETE SET NULL
) STRICT;

CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT,
  created_at INTEGER NOT NULL,
  event_zstd BLOB,
  event_utf8_bytes INTEGER CHECK (event_utf8_bytes IS NULL OR event_utf8_bytes >= 0),
  navigation_json TEXT,
  PRIMARY KEY (session_id, seq),
  FOREIGN KEY (session_id) REFERENCES "session_windows"(session_id) ON DELETE CASCADE,
  CHECK (
    (event_json IS NOT NULL AND event_zstd IS NULL)
    OR (
      event_json IS NULL AND event_zstd IS NOT NULL
      AND event_utf8_bytes IS NOT NULL
      AND event_utf8_bytes BETWEEN 1 AND 4194304
      AND length(event_zstd) BETWEEN 1 AND 4194304
      AND navigation_json IS NOT NULL
    )
  ),
  CHECK (
    navigation_json IS NULL OR CASE WHEN json_valid(navigation_json) THEN coalesce(
      octet_length(navigation_json) <= 16384
      AND json_type(navigation_json, '$.version') = 'integer'
      AND json_extract(navigation_json, '$.version') = 1
      AND json_type(navigation_json, '$.report') = 'object'
      AND json_extract(navigation_json, '$.report.kind') IN ('canonical', 'leaf', 'link', 'ignored')
      AND json_type(navigation_json, '$.navigation') = 'object'
      AND json_type(navigation_json, '$.reset') = 'object'
      AND json_type(navigation_json, '$.model') = 'object'
      AND json_type(navigation_json, '$.modelBytes') = 'integer'
      AND json_extract(navigation_json, '$.modelBytes') BETWEEN 0 AND 4194304
      AND json_type(navigation_json, '$.modelWithoutCheckpointBytes') = 'integer'
      AND json_extract(navigation_json, '$.modelWithoutCheckpointBytes') BETWEEN 0 AND 4194304
      AND json_type(navigation_json, '$.withoutCustomDataBytes') = 'integer'
      AND json_extract(navigation_json, '$.withoutCustomDataBytes') BETWEEN 0 AND 4194304,
      0) ELSE 0 END
  )
) STRICT;

CREATE TABLE session_transcript_archives (
  session_id TEXT NOT NULL,
  generation TEXT NOT NULL,
  session_key TEXT NOT NULL,
  reason TEXT NOT NULL CHECK (reason IN ('deleted', 'reset')),
  encoding TEXT NOT NULL CHECK (encoding IN ('identity', 'zstd')),
  archive_blob BLOB NOT NULL,
  archive_sha256 TEXT NOT NULL CHECK (length(archive_sha256) = 64),
  archive_name TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  published_at INTEGER,
  publish_attempts INTEGER NOT NULL DEFAULT 0 CHECK (publish_attempts >= 0),
  last_publish_attempt_at INTEGER,
  last_publish_error TEXT,
  PRIMARY KEY (session_id, generation),
  CHECK (archive_name NOT LIKE '%/%' AND archive_name NOT LIKE '%\%')
) STRICT;
"""

OBSERVATION_TELEGRAM = {
    "type": "observation",
    "pluginId": "telegram",
    "accountId": "default",
    "senderKind": "human",
}
OBSERVATION_DISCORD = {
    "type": "observation",
    "pluginId": "discord",
    "accountId": "work",
    "senderKind": "human",
}
PROFILE = {"type": "profile"}


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def navigation_json(size: int) -> str:
    """The smallest navigation record the transcript_events CHECK accepts (required with zstd)."""
    return dumps(
        {
            "version": 1,
            "report": {"kind": "canonical"},
            "navigation": {},
            "reset": {},
            "model": {},
            "modelBytes": size,
            "modelWithoutCheckpointBytes": size,
            "withoutCustomDataBytes": size,
        }
    )


def external_delivery(channel: str, account: str, to: str, chat_type: str) -> dict[str, Any]:
    return {
        "kind": "external",
        "route": {"channel": channel, "accountId": account, "target": {"to": to, "chatType": chat_type}},
        "context": {"channel": channel, "to": to, "accountId": account},
        "origin": {
            "provider": channel,
            "surface": channel,
            "chatType": chat_type,
            "to": to,
            "accountId": account,
        },
    }


def message_event(msg: Msg, parent: str | None, ts_ms: int) -> dict[str, Any]:
    """A v4 `message` event as OpenClaw appends it (a uuid id, content as blocks, vendor metadata
    in __openclaw): the pi v3 message line of the one transcript writer."""
    turn = msg.turn(ts_ms)
    if isinstance(turn.content, str):
        turn = replace(turn, content=[{"type": "text", "text": turn.content}])
    return message_line(str(uuid.uuid4()), parent, turn, timestamp=EVENT_TIME)


class OpenClawDbBuilder:
    """One agent database. Keeps its writer connection open (as a running OpenClaw does) until
    `close()`; after that the database is at rest: WAL checkpointed, no -wal/-shm files."""

    def __init__(self, sessions_root: Path, agent_id: str = "main", base_ms: int | None = None):
        self.agent_id = agent_id
        self.path = sessions_root / "agents" / agent_id / "agent" / "openclaw-agent.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.base_ms = base_ms if base_ms is not None else (int(time.time() * 1000) // DAY_MS - 1) * DAY_MS
        self.conn: Any = None
        self.open()
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session_nodes'").fetchone():
            self.conn.executescript(DDL)

    def open(self) -> OpenClawDbBuilder:
        self.conn = sqlite3.connect(str(self.path), isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA busy_timeout = 10000")
        return self

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def key(self, rest: str) -> str:
        return f"agent:{self.agent_id}:{rest}"

    # -- upsertSessionEntry ----------------------------------------------------------------------

    def upsert_entry(
        self,
        key: str,
        entry: dict[str, Any],
        *,
        reason: str = "initial",
        previous_session_id: str | None = None,
        scope: str = "conversation",
    ) -> None:
        """Writes the entry JSON and projects the current window, as OpenClaw's writer does:
        hook column gmail|webhook (email persisted as webhook), provenance 1, channel and account
        from an external delivery route, created_at = sessionStartedAt."""
        sid = entry["sessionId"]
        hook = entry.get("hookExternalContentSource")
        column = "gmail" if hook == "gmail" else "webhook" if hook in ("email", "webhook") else None
        delivery = entry.get("delivery") or {}
        route = (delivery.get("route") or {}) if delivery.get("kind") == "external" else {}
        started = entry.get("sessionStartedAt", self.base_ms)
        updated = entry.get("updatedAt", started)
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO session_nodes(session_key, current_session_id, entry_json, entry_valid, updated_at, "
                "created_at, created_via, spawned_by, label) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?) "
                "ON CONFLICT(session_key) DO UPDATE SET current_session_id = excluded.current_session_id, "
                "entry_json = excluded.entry_json, updated_at = excluded.updated_at, "
                "created_via = excluded.created_via, spawned_by = excluded.spawned_by, label = excluded.label",
                (
                    key,
                    sid,
                    dumps(entry),
                    updated,
                    started,
                    entry.get("createdVia"),
                    entry.get("spawnedBy"),
                    entry.get("label"),
                ),
            )
            self.conn.execute(
                "INSERT INTO session_windows(session_id, session_key, previous_session_id, reason, session_scope, "
                "created_at, updated_at, session_entry_provenance, hook_external_content_source, chat_type, channel, "
                "account_id, spawned_by, display_name) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, "
                "hook_external_content_source = excluded.hook_external_content_source, "
                "chat_type = excluded.chat_type, channel = excluded.channel, account_id = excluded.account_id",
                (
                    sid,
                    key,
                    previous_session_id,
                    reason,
                    scope,
                    started,
                    updated,
                    column,
                    entry.get("chatType"),
                    route.get("channel"),
                    route.get("accountId"),
                    entry.get("spawnedBy"),
                    entry.get("label"),
                ),
            )

    def add_window(
        self,
        key: str,
        sid: str,
        *,
        created_at: int,
        provenance: int = 0,
        hook_column: str | None = None,
        chat_type: str | None = None,
        channel: str | None = None,
        reason: str = "initial",
    ) -> None:
        """A window row written directly (older or imported rows: provenance 0 unless given)."""
        self.conn.execute(
            "INSERT INTO session_windows(session_id, session_key, reason, created_at, updated_at, "
            "session_entry_provenance, hook_external_content_source, chat_type, channel) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, key, reason, created_at, created_at, provenance, hook_column, chat_type, channel),
        )

    def entry(self, sid: str, started: int, **fields: Any) -> dict[str, Any]:
        return {
            "sessionId": sid,
            "updatedAt": started + 600_000,
            "sessionStartedAt": started,
            "lastInteractionAt": started + 600_000,
            **fields,
        }

    # -- appendSessionTranscriptMessageByIdentity --------------------------------------------------

    def append(
        self, sid: str, messages: list[Msg], *, zstd: bool = False, conn: Any = None
    ) -> list[dict[str, Any]]:
        """Appends events (a v4 header first if the transcript is empty) in one transaction;
        returns the events written."""
        db = conn or self.conn
        with db:
            db.execute("BEGIN IMMEDIATE")
            last = db.execute(
                "SELECT max(seq) FROM transcript_events WHERE session_id = ?", (sid,)
            ).fetchone()[0]
            events: list[dict[str, Any]] = []
            if last is None:
                events.append(session_header(sid, cwd="/tmp", timestamp=EVENT_TIME, version=4))
                parent = None
            else:
                row = db.execute(
                    "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? AND seq = ?",
                    (sid, last),
                ).fetchone()
                prev = json.loads(row[0] if row[0] is not None else zstandard.decompress(row[1]))
                parent = prev.get("id") if prev.get("type") == "message" else None
            for i, msg in enumerate(messages):
                ts = msg.ts if msg.ts is not None else self.base_ms + i * 1000
                event = message_event(msg, parent, ts)
                parent = event["id"]
                events.append(event)
            start = 0 if last is None else last + 1
            self.insert_events(sid, start, [dumps(e) for e in events], zstd=zstd, conn=db)
            now = int(time.time() * 1000)
            db.execute(
                "UPDATE session_windows SET transcript_updated_at = ? WHERE session_id = ?", (now, sid)
            )
        return events

    def insert_events(
        self, sid: str, start_seq: int, texts: list[str], *, zstd: bool = False, conn: Any = None
    ) -> None:
        """Raw event rows (for events a test wants byte for byte)."""
        db = conn or self.conn
        now = int(time.time() * 1000)
        rows = []
        for offset, text in enumerate(texts):
            raw = text.encode()
            if zstd:
                rows.append(
                    (
                        sid,
                        start_seq + offset,
                        None,
                        now,
                        zstandard.compress(raw),
                        len(raw),
                        navigation_json(len(raw)),
                    )
                )
            else:
                rows.append((sid, start_seq + offset, text, now, None, None, None))
        db.executemany(
            "INSERT INTO transcript_events(session_id, seq, event_json, created_at, event_zstd, "
            "event_utf8_bytes, navigation_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    # -- recordSessionParticipant --------------------------------------------------------------------

    def add_participant(self, key: str, namespace: dict[str, Any], actor_id: str, count: int = 1) -> None:
        self.conn.execute(
            "INSERT INTO session_participants(session_key, identity_namespace, actor_id, contribution_count, "
            "first_prompted_at, last_prompted_at) VALUES (?, ?, ?, ?, ?, ?)",
            (key, dumps(namespace), actor_id, count, self.base_ms, self.base_ms),
        )

    # -- convenience -------------------------------------------------------------------------------

    def session(
        self,
        key: str,
        sid: str,
        messages: list[Msg],
        *,
        started: int | None = None,
        zstd: bool = False,
        participants: tuple[tuple[dict[str, Any], str], ...] = (),
        **entry_fields: Any,
    ) -> list[dict[str, Any]]:
        """A live session: entry, projected window, transcript events, participant rows."""
        self.upsert_entry(key, self.entry(sid, self.base_ms if started is None else started, **entry_fields))
        events = self.append(sid, messages, zstd=zstd)
        for namespace, actor in participants:
            self.add_participant(key, namespace, actor)
        return events

    def archive(
        self,
        sid: str,
        key: str,
        reason: str,
        lines: list[dict[str, Any]],
        *,
        encoding: str = "identity",
        created_at: int | None = None,
    ) -> str:
        """A retained transcript generation; returns its archive name."""
        jsonl = "".join(dumps(line) + "\n" for line in lines).encode()
        blob = zstandard.compress(jsonl) if encoding == "zstd" else jsonl
        created = created_at if created_at is not None else self.base_ms
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(created / 1000)) + ".000Z"
        name = f"{sid}.jsonl.{reason}.{stamp}" + (".zst" if encoding == "zstd" else "")
        self.conn.execute(
            "INSERT INTO session_transcript_archives(session_id, generation, session_key, reason, encoding, "
            "archive_blob, archive_sha256, archive_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                str(uuid.uuid4()),
                key,
                reason,
                encoding,
                blob,
                hashlib.sha256(blob).hexdigest(),
                name,
                created,
            ),
        )
        return name

    def delete_session(self, key: str, *, encoding: str = "identity", created_at: int | None = None) -> None:
        """`openclaw sessions delete`: archive each window's transcript (reason deleted), then
        drop the key (windows, events and participants cascade)."""
        windows = [
            r[0]
            for r in self.conn.execute("SELECT session_id FROM session_windows WHERE session_key = ?", (key,))
        ]
        for sid in windows:
            lines = [
                json.loads(t if t is not None else zstandard.decompress(z))
                for t, z in self.conn.execute(
                    "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq",
                    (sid,),
                )
            ]
            self.archive(sid, key, "deleted", lines, encoding=encoding, created_at=created_at)
        self.conn.execute("DELETE FROM session_nodes WHERE session_key = ?", (key,))

    def files(self) -> dict[str, bytes]:
        """Every file in the database's directory, by name, with its bytes."""
        return {p.name: p.read_bytes() for p in sorted(self.path.parent.iterdir())}


def sid(n: int) -> str:
    return f"5e55a000-0000-4000-8000-{n:012x}"


HOUR_MS = 3_600_000


def populate(b: OpenClawDbBuilder) -> dict[str, Any]:
    """One agent with every case a reader meets: direct and group chats (participants in several
    identity namespaces), hook sessions with each hookExternalContentSource, reset windows,
    windows whose columns are or are not trusted, cron/heartbeat/subagent/narrative sessions,
    zstd events, and reset and deleted archives in both encodings. Returns what it wrote."""
    t = b.base_ms
    events: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, str] = {}

    def live(name: str, key: str, n: int, messages: list[Msg], **kw: Any) -> None:
        keys[name] = key
        events[sid(n)] = b.session(key, sid(n), messages, **kw)

    live(
        "direct",
        b.key("main"),
        1,
        [
            Msg("user", "Please remember that the boiler service is booked for Tuesday morning."),
            Msg("assistant", "Noted: the boiler service is booked for Tuesday morning."),
            Msg(
                "toolResult",
                "Weather page text fetched from the network",
                owner=False,
                extra={"resultContentSource": "network"},
            ),
            Msg(
                "assistant", "The forecast page says it will rain all week long.", extra={"turnTainted": True}
            ),
            Msg(
                "user",
                "Heartbeat check: anything pending for the owner today?",
                owner=False,
                extra={"provenance": {"kind": "internal_system"}},
            ),
        ],
        started=t,
        chatType="direct",
        delivery=external_delivery("telegram", "default", "1001", "direct"),
        participants=((PROFILE, "owner"),),
    )
    live(
        "group",
        b.key("telegram:group:-100555"),
        0xD,
        [
            Msg(
                "user",
                "Team dinner is booked at Trattoria Roma for Friday 19:30.",
                extra={"senderId": "tg:1001", "senderIdentity": {**OBSERVATION_TELEGRAM, "id": "tg:1001"}},
            ),
            Msg(
                "user",
                "I would rather go somewhere with vegetarian options please.",
                owner=False,
                extra={"senderId": "tg:2002", "senderIdentity": {**OBSERVATION_TELEGRAM, "id": "tg:2002"}},
            ),
            Msg("assistant", "Dinner at Trattoria Roma, Friday 19:30; vegetarian options requested."),
        ],
        started=t + HOUR_MS,
        chatType="group",
        delivery=external_delivery("telegram", "default", "-100555", "group"),
        participants=(
            (OBSERVATION_TELEGRAM, "tg:1001"),
            (OBSERVATION_TELEGRAM, "tg:2002"),
            (OBSERVATION_DISCORD, "tg:2002"),
            (PROFILE, "alice"),
        ),
    )
    live(
        "gmail",
        b.key("hook:gmail:msg-19a4"),
        5,
        [
            Msg("user", "New mail from the landlord: the rent goes up in March.", owner=False),
            Msg("assistant", "Summarised the landlord's mail about the rent increase."),
        ],
        started=t + 2 * HOUR_MS,
        zstd=True,
        hookExternalContentSource="gmail",
        delivery={"kind": "internal"},
    )
    live(
        "email",
        b.key("hook:imap-7"),
        6,
        [Msg("user", "IMAP mail: the dentist moved the appointment.", owner=False)],
        started=t + 3 * HOUR_MS,
        hookExternalContentSource="email",
        delivery={"kind": "internal"},
    )
    live(
        "webhook",
        b.key("hook:webhook:deploy"),
        7,
        [Msg("user", "Deploy hook: build 4411 is green.", owner=False)],
        started=t + 4 * HOUR_MS,
        hookExternalContentSource="webhook",
        delivery={"kind": "internal"},
    )

    # gmail hook key reset once: both windows stay; the old generation is also archived (reset).
    keys["gmail_reset"] = key = b.key("hook:gmail:msg-20b1")
    events[sid(8)] = b.session(
        key,
        sid(8),
        [Msg("user", "Old mail thread about the car insurance renewal.", owner=False)],
        started=t + 5 * HOUR_MS,
        hookExternalContentSource="gmail",
        delivery={"kind": "internal"},
    )
    b.upsert_entry(
        key,
        b.entry(sid(9), t + 6 * HOUR_MS, hookExternalContentSource="gmail", delivery={"kind": "internal"}),
        reason="reset",
        previous_session_id=sid(8),
    )
    events[sid(9)] = b.append(
        sid(9), [Msg("user", "New mail thread about the car insurance quote.", owner=False)]
    )
    b.archive(sid(8), key, "reset", events[sid(8)], created_at=t + 6 * HOUR_MS)

    # email hook key reset once: the old window keeps only the coarse `webhook` column.
    keys["email_reset"] = key = b.key("hook:imap-8")
    events[sid(0xA)] = b.session(
        key,
        sid(0xA),
        [Msg("user", "IMAP mail: the library book is overdue.", owner=False)],
        started=t + 7 * HOUR_MS,
        hookExternalContentSource="email",
    )
    b.upsert_entry(
        key,
        b.entry(sid(0xB), t + 8 * HOUR_MS, hookExternalContentSource="email"),
        reason="reset",
        previous_session_id=sid(0xA),
    )
    events[sid(0xB)] = b.append(
        sid(0xB), [Msg("user", "IMAP mail: the library renewed the book.", owner=False)]
    )

    # An older entry without a hook field; extra windows: one not projected by the entry writer
    # (provenance 0, column gmail: untrusted) and one projected (provenance 1, gmail: trusted).
    keys["legacy"] = key = b.key("hook:gmail:legacy")
    events[sid(0xC)] = b.session(
        key,
        sid(0xC),
        [Msg("user", "Legacy hook session text for testing.", owner=False)],
        started=t + 9 * HOUR_MS,
    )
    b.add_window(key, sid(0xE), created_at=t + 9 * HOUR_MS + 1, provenance=0, hook_column="gmail")
    b.add_window(key, sid(0x10), created_at=t + 9 * HOUR_MS + 2, provenance=1, hook_column="gmail")
    b.add_window(key, sid(0x17), created_at=t + 9 * HOUR_MS + 3, provenance=1, hook_column="webhook")

    live(
        "cron",
        b.key("cron:nightly-digest"),
        0x11,
        [Msg("user", "Cron preamble: write the nightly digest now.")],
        started=t + 10 * HOUR_MS,
        createdVia="cron",
    )
    live(
        "heartbeat",
        b.key("main:heartbeat"),
        0x12,
        [Msg("user", "Heartbeat: check the owner's inbox status.")],
        started=t + 11 * HOUR_MS,
    )
    live(
        "subagent",
        b.key("subagent:research-1"),
        0x13,
        [Msg("user", "Research the cheapest train to Leeds.")],
        started=t + 12 * HOUR_MS,
    )
    live(
        "spawned",
        b.key("task:pack-list"),
        0x14,
        [Msg("user", "Make a packing list for the Leeds trip.")],
        started=t + 13 * HOUR_MS,
        spawnedBy=b.key("main"),
    )
    live(
        "narrative",
        b.key("dreaming-narrative-memory-core-v2-light"),
        0x15,
        [Msg("user", "Write the dream diary narrative for today.")],
        started=t + 14 * HOUR_MS,
    )

    # A deleted channel session: only its zstd archive remains.
    keys["deleted"] = key = b.key("discord:channel:c0proj")
    events[sid(0x16)] = b.session(
        key,
        sid(0x16),
        [Msg("user", "Project channel: the launch moved to May.")],
        started=t + 15 * HOUR_MS,
        zstd=True,
        chatType="channel",
        delivery=external_delivery("discord", "work", "c0proj", "channel"),
        participants=((OBSERVATION_DISCORD, "dc:77"),),
    )
    b.delete_session(key, encoding="zstd", created_at=t + 16 * HOUR_MS)
    return {"events": events, "keys": keys}
