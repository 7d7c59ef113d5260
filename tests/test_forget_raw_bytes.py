"""After a forget apply (without --verify), no byte sequence of the forgotten sessions' text is
left in any file under state_dir: databases, WAL and journal files, the workspace. Raw bytes,
read from disk: free space inside pages and free pages count.

The store is used the way a daemon uses it (ingest, dreaming, index with transcripts, ingest
again: rows updated in place, cells moved) before the forget, so that stale cell bytes have
every chance to exist."""

from __future__ import annotations

from pathlib import Path

from daemon.agent_runtime import agent_runtime
from daemon.dreaming.sweep import run_dreaming
from daemon.forget.request import ForgetRequest
from daemon.forget.run import forget
from daemon.index.sync import run_index_sync
from daemon.ingest.sweep import run_ingest_sweep
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

AGENT = "main"
FORGOTTEN = [
    "Remember that the wombat orchestra rehearses behind the tannery on Wednesdays.",
    "Remember that my cousin Ilsabet keeps the spare kayak paddles in the loft.",
    "Remember that the quinoa silo password is written inside the blue almanac.",
]
RARE_TERMS = ["wombat", "tannery", "Ilsabet", "quinoa", "almanac"]
SURVIVING = "Remember that the orchard rota changes every Monday morning at dawn."
MIN_BYTES = 16


def _windows(text: str) -> set[bytes]:
    """Every MIN_BYTES-long window of the UTF-8 text: any one found is residue."""
    raw = text.encode()
    return {raw[i : i + MIN_BYTES] for i in range(0, len(raw) - MIN_BYTES + 1)}


def _scan(root: Path, needles: set[bytes]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = sorted(n for n in needles if n in data)
        if hits:
            found[str(path.relative_to(root))] = hits[:3]
    return found


def _build(sessions_root: Path) -> SessionStoreBuilder:
    b = SessionStoreBuilder(sessions_root, AGENT)
    for i, text in enumerate(FORGOTTEN):
        b.add(
            f"agent:main:dm:zed-{i}",
            f"sess-zed-{i}",
            [Msg("user", text), Msg("assistant", "Noted: " + text)],
            participants=[{"actorId": "zed"}],
            chatType="direct",
        )
    b.add(
        "agent:main:dm:omar",
        "sess-omar",
        [Msg("user", SURVIVING), Msg("assistant", "Noted: " + SURVIVING)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    return b


async def test_no_forgotten_bytes_remain_under_state_dir_after_a_forget_apply(tmp_path, redis):
    sessions_root = tmp_path / "sessions"
    b = _build(sessions_root)
    settings = make_settings(
        tmp_path,
        sessions_root,
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}},
        dreaming={"min_score": 0, "min_recall_count": 0, "min_unique_queries": 0},
    )
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        await run_index_sync(rt)
        # More of the same sessions: staged rows are updated, pages split and cells move.
        for i, text in enumerate(FORGOTTEN):
            b.append(f"sess-zed-{i}", [Msg("user", "Also: " + text.lower())], 2)
        b.append("sess-omar", [Msg("user", "Also: " + SURVIVING.lower())], 2)
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        await run_index_sync(rt, force=True)
    state = settings.state_dir
    said = [*FORGOTTEN, *(t.lower() for t in FORGOTTEN)]
    kept = set().union(
        *(_windows(t) for t in (SURVIVING, "Also: " + SURVIVING.lower(), "Noted: " + SURVIVING))
    )
    # Windows the survivor's text holds too may stay through it ("Remember that the ...").
    needles = {w for t in said for w in _windows(t)} - kept | {t.encode() for t in RARE_TERMS}
    assert _scan(state, needles)  # the text was there to find

    report = await forget(settings, ForgetRequest(agent=AGENT, participants=["zed"]), redis=redis)
    assert report.artifacts.shortTermEntries > 0

    assert _scan(state, needles) == {}
    assert _scan(state, {SURVIVING.encode()[:40]})  # the survivor's text is still there
