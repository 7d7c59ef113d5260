"""Two users' direct sessions and a group chat with both, ingested and indexed, with promoted
entries whose origins are recorded: the world the recall-scope and MCP tests recall from."""

from __future__ import annotations

from pathlib import Path

from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.store.origins import EntryOrigin, record_origins
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

AGENT = "main"
ANN_DIRECT = "sess-ann-1"
BEN_DIRECT = "sess-ben-1"
GROUP = "sess-group-1"
WORDS = {
    ANN_DIRECT: "Remember that my quince allergy flares up every spring.",
    BEN_DIRECT: "Remember that my walnut savings account number ends in forty two.",
    GROUP: "Remember that the marigold picnic is at the river on Sunday.",
}
MEMORY = """# Long-Term Memory

The owner keeps the lantern spare key in the blue drawer.

<!-- memoryd-promotion:memory:quince -->
- Ann's quince allergy flares up every spring.

<!-- memoryd-promotion:memory:merged -->
- The marigold picnic needs quince-free food for Ann.

<!-- memoryd-promotion:memory:picnic -->
- The marigold picnic is at the river on Sunday.

<!-- memoryd-promotion:memory:walnut -->
- Ben's walnut savings account ends in forty two.

<!-- memoryd-promotion:memory:orphan -->
- The orphan lantern entry has no recorded origin.
"""
ORIGINS = {
    "memory:quince": [ANN_DIRECT],
    "memory:merged": [ANN_DIRECT, GROUP],  # a merged entry: one origin is Ann's direct chat
    "memory:picnic": [GROUP],
    "memory:walnut": [BEN_DIRECT],
}


def build_world(tmp_path: Path, sessions_root: Path, unique: str):
    b = SessionStoreBuilder(sessions_root, AGENT)
    for sid, user in ((ANN_DIRECT, "ann"), (BEN_DIRECT, "ben")):
        b.add(
            f"agent:main:dm:{user}",
            sid,
            [Msg("user", WORDS[sid]), Msg("assistant", "Noted: " + WORDS[sid])],
            participants=[{"actorId": user}],
            chatType="direct",
        )
    b.add(
        "agent:main:telegram:group:-100",
        GROUP,
        [Msg("user", WORDS[GROUP]), Msg("assistant", "Noted: " + WORDS[GROUP])],
        participants=[{"actorId": "ann"}, {"actorId": "ben"}],
        chatType="group",
        channel="telegram",
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text(MEMORY)
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={AGENT: {"workspace": str(ws)}},
        index={"sources": ["memory", "sessions"]},
    )


async def ingest_and_index(rt) -> None:
    await run_ingest_sweep(rt)  # records each session's participants
    async with rt.lock().hold() as lease:
        await rt.require_store().write(
            record_origins,
            AGENT,
            [
                EntryOrigin(key, AGENT, sid, None, "owner", 1_700_000_000_000)
                for key, sids in ORIGINS.items()
                for sid in sids
            ],
            fence=lease.fence,
        )
    await run_index_sync(rt)
