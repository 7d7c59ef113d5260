"""A populated agent for forget tests, built directly: session store on disk, workspace files,
and store rows written with plain SQL, so forget is tested without depending on ingestion,
dreaming or indexing.

Sessions of agent "main":
  target          key agent:main:main           participant nora (gmail hook)
  other           key agent:main:signal:dm:omar participant omar
  prefix-survivor key agent:main:survivor       (and origins for "PREFIX", "prefix.jsonl.other")
  cronjob         key cron:nightly              kind cron (stale transcript chunks)
Entries: k-target (target), k-mixed (target + other), k-other (other), k-survivor
(prefix-survivor, PREFIX, prefix.jsonl.other); MEMORY.md also holds k-untracked (no origin).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from memoryd.agents import agent_paths
from memoryd.fileio import sha256_hex
from memoryd.settings import Settings
from memoryd.store.db import Connection, Store
from memoryd.store.seen_hashes import add_seen
from tests.builders import Msg, SessionStoreBuilder

TARGET_SNIPPET = "User: Please remember violet-mongoose-42."
OTHER_SNIPPET = "User: The orchard rota changes on Monday."
SHORT_SNIPPET = "shorty"  # 6 characters: too short to ever remove a line by quotation
DAY = "2026-08-25"
CORPUS_MIXED = f"memory/.dreams/session-corpus/{DAY}.txt"
CORPUS_TARGET_ONLY = "memory/.dreams/session-corpus/2026-08-26.md"

MEMORY_MD = """# Memory

<!-- memoryd-promotion:k-target -->
- The launch code is violet-mongoose-42.
  It was set for the autumn launch.
<!-- memoryd-lineage:k-old -->
<!-- memoryd-promotion:k-mixed -->
- The team prefers the orchard rota and the violet plan.
<!-- memoryd-promotion:k-other -->
- The orchard rota changes on Monday.
<!-- memoryd-promotion:k-survivor -->
- Survivor sessions keep their own memory.
<!-- openclaw-memory-promotion:k-untracked -->
- A handwritten note with no recorded origin.
- A plain note that says shorty more than once: shorty.
"""

MEMORY_MD_AFTER = """# Memory

<!-- memoryd-promotion:k-other -->
- The orchard rota changes on Monday.
<!-- memoryd-promotion:k-survivor -->
- Survivor sessions keep their own memory.
<!-- openclaw-memory-promotion:k-untracked -->
- A handwritten note with no recorded origin.
- A plain note that says shorty more than once: shorty.
"""

DREAMS_MD = f"""# Dream Diary

## Light Sleep
- Quoted today: {TARGET_SNIPPET}
- Quoted too: {OTHER_SNIPPET}

## Session ID: target
A reflection about the launch.
More reflection.

## Kept section
Nothing about anyone.
"""

DREAMS_MD_AFTER = f"""# Dream Diary

## Light Sleep
- Quoted too: {OTHER_SNIPPET}

## Kept section
Nothing about anyone.
"""

DAILY_MD = """# 2026-08-25

- Session ID: target; launch planning
  - decided the code word
  - agreed on a date
- Session ID: other; rota planning
  - Monday changes
"""

DAILY_MD_AFTER = """# 2026-08-25

- Session ID: other; rota planning
  - Monday changes
"""

CORPUS_MIXED_TEXT = (
    "\n".join(
        [
            f"[main/sessions/main/target#L2] {TARGET_SNIPPET}",
            f"[main/sessions/main/other#L2] {OTHER_SNIPPET}",
            f"[main/sessions/main/target#L4] {SHORT_SNIPPET}",
            "[main/sessions/main/prefix-survivor#L2] User: Survivor sessions keep their own memory.",
            "[main/sessions/main/PREFIX#L2] User: Upper-case ids are other sessions.",
            "[main/sessions/main/prefix.jsonl.other#L2] User: Not a transcript name of prefix.",
        ]
    )
    + "\n"
)
CORPUS_TARGET_ONLY_TEXT = (
    "[main/sessions/main/target.jsonl.reset.2026-08-25T10-00-00.000Z#L3] User: Archived words.\n"
)

BACKUP_WITH_TARGET = MEMORY_MD
BACKUP_UNRELATED = "# Memory\n\n<!-- memoryd-promotion:k-other -->\n- The orchard rota changes on Monday.\n"


def chunk_id(path: str, start: int, text: str) -> str:
    return hashlib.sha256(f"{path}:{start}:{text}".encode()).hexdigest()


@dataclass
class Chunk:
    path: str
    source: str
    text: str
    session_id: str | None = None
    origin_class: str = "owner"
    session_kind: str = "interactive"
    vector: bool = True


CHUNKS = [
    Chunk("MEMORY.md", "memory", MEMORY_MD),
    Chunk("DREAMS.md", "memory", DREAMS_MD, vector=False),
    Chunk("memory/2026-08-25.md", "memory", DAILY_MD),
    Chunk("USER.md", "memory", "# User\n- likes tea\n"),  # untouched file: its chunk stays
    Chunk(CORPUS_MIXED, "memory", CORPUS_MIXED_TEXT),
    Chunk(CORPUS_TARGET_ONLY, "memory", CORPUS_TARGET_ONLY_TEXT),
    Chunk("sessions/main/target", "sessions", "User: Please remember violet-mongoose-42.", "target"),
    Chunk("sessions/main/other", "sessions", OTHER_SNIPPET, "other"),
    Chunk("sessions/main/prefix-survivor", "sessions", "survivor words", "prefix-survivor"),
    Chunk("sessions/main/cronjob", "sessions", "nightly cron output", "cronjob", "system", "cron"),
]


class ForgetWorld:
    """Builds the populated agent; `settings` carries the tmp state dir and sessions root."""

    def __init__(self, settings: Settings, sessions_root: Path, agent: str = "main"):
        self.settings = settings
        self.agent = agent
        self.paths = agent_paths(settings, agent)
        self.workspace = self.paths.workspace
        self.sessions = SessionStoreBuilder(sessions_root, agent)

    # --- sessions ------------------------------------------------------------------------------
    def build_sessions(self) -> None:
        s = self.sessions
        s.add(
            "agent:main:main",
            "target",
            [
                Msg("user", "Please remember violet-mongoose-42."),
                Msg(
                    "assistant",
                    [
                        {
                            "type": "toolCall",
                            "id": "w1",
                            "name": "write",
                            "arguments": {"path": "USER.md", "content": "x"},
                        }
                    ],
                ),
                Msg(
                    "assistant",
                    [
                        {
                            "type": "tool_use",
                            "id": "w2",
                            "name": "apply_patch",
                            "input": "*** Begin Patch\n*** Update File: memory/notes.md\n*** End Patch",
                        }
                    ],
                ),
                Msg(
                    "assistant",
                    [
                        {
                            "type": "toolCall",
                            "id": "w3",
                            "name": "write",
                            "arguments": {"path": "../outside.md"},
                        }
                    ],
                ),
            ],
            hookExternalContentSource="gmail",
            participants=[{"actorId": "nora"}],
        )
        s.add(
            "agent:main:signal:dm:omar",
            "other",
            [Msg("user", "The orchard rota changes on Monday.")],
            channel="signal",
            participants=[{"actorId": "omar", "namespace": {"type": "remote", "domain": "signal"}}],
        )
        s.add("agent:main:survivor", "prefix-survivor", [Msg("user", "Survivor sessions keep their memory.")])
        s.add("cron:nightly", "cronjob", [Msg("user", "nightly run")], kind="cron")
        s.archive("target", "reset", "2026-08-25T10-00-00.000Z", [Msg("user", "Archived words.")])

    def transcript_bytes(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.sessions.dir.iterdir())}

    # --- files ---------------------------------------------------------------------------------
    def write(self, rel: str, text: str) -> Path:
        path = self.workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def read(self, rel: str) -> str | None:
        path = self.workspace / rel
        return path.read_text() if path.exists() else None

    def build_files(self) -> None:
        self.write("MEMORY.md", MEMORY_MD)
        self.write("DREAMS.md", DREAMS_MD)
        self.write("memory/2026-08-25.md", DAILY_MD)
        self.write("USER.md", "# User\n- likes tea\n")
        self.write(CORPUS_MIXED, CORPUS_MIXED_TEXT)
        self.write(CORPUS_TARGET_ONLY, CORPUS_TARGET_ONLY_TEXT)

    # --- store rows ------------------------------------------------------------------------------
    async def open_store(self) -> Store:
        return await Store.open(self.paths.db_path)

    async def sql(self, fn, *args):
        store = await self.open_store()
        try:
            return await store.write(fn, *args, fence=None)
        finally:
            await store.close()

    async def query(self, sql: str, *params) -> list[tuple]:
        store = await self.open_store()
        try:
            return await store.read(lambda conn: conn.execute(sql, params).fetchall())
        finally:
            await store.close()

    async def build_rows(self) -> None:
        await self.sql(populate_rows, self.agent)

    async def build(self) -> ForgetWorld:
        self.build_sessions()
        self.build_files()
        await self.build_rows()
        return self


ORIGINS = [
    ("k-target", "target", "agent:main:main"),
    ("k-mixed", "target", "agent:main:main"),
    ("k-mixed", "other", "agent:main:signal:dm:omar"),
    ("k-other", "other", "agent:main:signal:dm:omar"),
    ("k-survivor", "prefix-survivor", "agent:main:survivor"),
    ("k-survivor", "PREFIX", None),
    ("k-survivor", "prefix.jsonl.other", None),
]


def populate_rows(conn: Connection, agent: str) -> None:
    conn.executemany(
        "INSERT INTO memory_entry_origins(entry_key, agent_id, session_id, session_key, origin_class, observed_at) "
        "VALUES (?, ?, ?, ?, 'owner', 1)",
        [(k, agent, s, key) for k, s, key in ORIGINS],
    )
    conn.executemany(
        "INSERT INTO short_term_entries(entry_key, path, start_line, end_line, snippet, first_recalled_at, "
        "last_recalled_at, origin_class, observed_at) VALUES (?, ?, 1, 1, ?, 1, 1, 'owner', 1)",
        [
            ("k-target", CORPUS_MIXED, TARGET_SNIPPET),
            ("k-mixed", CORPUS_MIXED, "mixed words"),
            ("k-other", CORPUS_MIXED, OTHER_SNIPPET),
            # no origin, but its text names the session: removed by reference
            ("k-loose", "memory/2026-08-25.md", "Session ID: target notes"),
            ("k-daily", "memory/2026-08-25.md", "a daily note entry"),
        ],
    )
    conn.executemany(
        "INSERT INTO phase_signals(entry_key, light_hits) VALUES (?, 1)",
        [("k-target",), ("k-mixed",), ("k-other",), ("k-loose",), ("k-daily",)],
    )
    conn.executemany(
        "INSERT INTO ingest_checkpoints(state_key, agent_id, session_id, session_path, mtime_ms, size, content_hash, "
        "line_count, last_content_line, updated_at) VALUES (?, ?, ?, ?, 1, 1, 'h', 1, 1, 1)",
        [
            (f"{agent}:sessions/{agent}/{sid}", agent, sid, f"sessions/{agent}/{sid}")
            for sid in ("target", "other", "prefix-survivor")
        ],
    )
    add_seen(
        conn,
        {f"{agent}:target": ["h1", "h2"], f"{agent}:other": ["h3"], f"{agent}:prefix-survivor": ["h4"]},
    )
    conn.executemany(
        "INSERT INTO memory_backups(created_at, content, content_hash) VALUES (?, ?, ?)",
        [
            (1, BACKUP_WITH_TARGET, sha256_hex(BACKUP_WITH_TARGET)),
            (2, BACKUP_UNRELATED, sha256_hex(BACKUP_UNRELATED)),
        ],
    )
    conn.executemany(
        "INSERT INTO curated_writes(relative_path, origin_class, observed_at, session_id, session_key) "
        "VALUES (?, 'agent', ?, ?, ?)",
        [
            ("MEMORY.md", 1787738401000, "target", "agent:main:main"),
            ("memory/other.md", 1787738402000, "other", None),
        ],
    )
    for c in CHUNKS:
        cid = chunk_id(c.path, 1, c.text)
        cur = conn.execute(
            "INSERT INTO memory_index_chunks(id, path, source, start_line, end_line, hash, model, text, session_id, "
            "updated_at) VALUES (?, ?, ?, 1, 1, ?, 'hashing', ?, ?, 1)",
            (cid, c.path, c.source, sha256_hex(c.text), c.text, c.session_id),
        )
        rowid = cur.lastrowid
        conn.execute(
            "INSERT INTO memory_index_chunk_provenance(chunk_id, origin_class, session_kind, observed_at) "
            "VALUES (?, ?, ?, 1)",
            (cid, c.origin_class, c.session_kind),
        )
        conn.execute("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)", (rowid, c.text))
        if c.vector:
            conn.execute(
                "INSERT INTO memory_index_vectors(chunk_rowid, model, dims, embedding) VALUES (?, 'hashing', 2, ?)",
                (rowid, b"\x00" * 8),
            )
        conn.execute(
            "INSERT OR IGNORE INTO memory_index_sources(path, source, hash, mtime, size, session_id) "
            "VALUES (?, ?, 'h', 1, 1, ?)",
            (c.path, c.source, c.session_id),
        )
    conn.executemany(
        "INSERT INTO memory_embedding_cache(provider, model, provider_key, hash, embedding, updated_at) "
        "VALUES ('hashing', 'hashing', '', ?, x'00', 1)",
        [(f"h{i}",) for i in range(3)],
    )
