"""DREAMS.md: managed `## Light Sleep` / `## REM Sleep` / `## Session Backfill` blocks.

Every diary line is a tracked entry: its own promotion marker (a diary key) above the line,
indented details below it, and origin rows for every session whose text it quotes, recorded
*before* the block is published. Forget then removes a whole line (marker, line and details)
when any contributing session is forgotten (reference §5.5, §5.8, §7.5). Origin rows of diary
keys that a rewrite of the block dropped are pruned after the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import DREAM_COMMIT_ATTEMPTS
from memoryd.derivations import diary_digest
from memoryd.dreaming.lineage import reserve_rows, rollback_rows
from memoryd.dreaming.memory_file import MemorySnapshot, commit_memory, read_snapshot
from memoryd.errors import WriteConflict
from memoryd.lock import Lease
from memoryd.markers import promotion_keys_in, promotion_marker
from memoryd.store.db import Connection
from memoryd.store.exclusions import check_exclusions
from memoryd.store.origins import EntryOrigin, delete_origins_for_entries
from memoryd.store.tombstones import forgotten_ids

DIARY_HEADER = "# Dream Diary"
MAX_COMMIT_ATTEMPTS = DREAM_COMMIT_ATTEMPTS


@dataclass(frozen=True, slots=True)
class DiaryLine:
    key: str
    text: str  # without the bullet
    details: tuple[str, ...] = ()  # rendered as indented sub-bullets
    origins: tuple[EntryOrigin, ...] = ()  # re-keyed to `key` on publication

    def render(self) -> list[str]:
        return [promotion_marker(self.key), f"- {self.text}", *(f"  - {d}" for d in self.details)]


@dataclass(frozen=True, slots=True)
class BlockItem:
    """A line of a block: a plain heading/text line (no lineage) or a tracked DiaryLine."""

    plain: str | None = None
    line: DiaryLine | None = None


def diary_key(kind: str, day: str, text: str) -> str:
    return f"memory:{kind}:{diary_digest(day, text)}"


def diary_path(workspace: Path) -> tuple[Path, str]:
    upper, lower = workspace / "DREAMS.md", workspace / "dreams.md"
    if not upper.exists() and lower.is_file() and not lower.is_symlink():
        return lower, "dreams.md"
    return upper, "DREAMS.md"


def read_diary(workspace: Path) -> MemorySnapshot:
    path, rel = diary_path(workspace)
    return read_snapshot(path, rel)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- memoryd:dreaming:{name}:start -->", f"<!-- memoryd:dreaming:{name}:end -->"


def block_text(text: str, name: str) -> str | None:
    start, end = _markers(name)
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0:
        return None
    return text[i + len(start) : j]


def replace_block(text: str, name: str, heading: str, body: Sequence[str]) -> str:
    """Pure: put `body` between the block's markers, adding heading and markers if absent."""
    start, end = _markers(name)
    inner = "\n" + "".join(line + "\n" for line in body)
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i >= 0 and j >= 0:
        return text[: i + len(start)] + inner + text[j:]
    base = text if text.strip() else DIARY_HEADER + "\n"
    if not base.endswith("\n"):
        base += "\n"
    return base + f"\n## {heading}\n{start}{inner}{end}\n"


def remove_block(text: str, name: str, heading: str) -> str:
    """Pure: drop the block, its markers and its heading line."""
    start, end = _markers(name)
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0:
        return text
    head = f"\n## {heading}\n"
    k = i - len(head) + 1
    if k > 0 and text[k - 1 : i] == head:
        i = k - 1
    after = j + len(end)
    if text[after : after + 1] == "\n":
        after += 1
    return text[:i] + ("\n" if i > 0 and not text[:i].endswith("\n") else "") + text[after:]


def render_items(items: Sequence[BlockItem]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item.line is not None:
            out.extend(item.line.render())
        elif item.plain is not None:
            out.append(item.plain)
    return out


def _reserve(
    conn: Connection, agent_id: str, rows: Sequence[EntryOrigin], secret: bytes | None, exclusions: int | None
) -> tuple[set[str], list[EntryOrigin]]:
    if exclusions is not None:
        check_exclusions(conn, exclusions)
    gone = forgotten_ids(conn, {o.session_id for o in rows}, secret)
    if gone:
        return gone, []
    return set(), reserve_rows(conn, agent_id, rows)


def _prune(conn: Connection, agent_id: str, keys: Sequence[str]) -> int:
    return delete_origins_for_entries(conn, agent_id, list(keys))


async def publish_block(
    rt: AgentRuntime,
    lease: Lease,
    name: str,
    heading: str,
    items: Sequence[BlockItem],
    exclusions: int | None = None,
) -> tuple[int, list[EntryOrigin], list[str]]:
    """Rewrite one managed block under the held lock.

    Returns (diary lines written, origin rows added, warnings). Lines quoting a session that
    was forgotten meanwhile are dropped before anything is published. `exclusions`: the
    exclusion set's generation the items were read under; if a purge has moved it since,
    ExclusionsChanged is raised and nothing is written (the caller reads again). None: the
    items were read under the lock held now.
    """
    store = rt.require_store()
    secret = rt.secret()
    warnings: list[str] = []
    current = list(items)
    for _ in range(MAX_COMMIT_ATTEMPTS):
        snap = read_diary(rt.paths.workspace)
        if not snap.writable:
            return 0, [], [snap.problem or f"{snap.relative_path} is not writable"]
        text = snap.text or ""
        old_keys = set(promotion_keys_in(block_text(text, name) or ""))
        new_text = replace_block(text, name, heading, render_items(current))
        lines = [i.line for i in current if i.line is not None]
        rows = [replace(o, entry_key=ln.key) for ln in lines for o in ln.origins]
        gone, added = await store.write(_reserve, rt.agent_id, rows, secret, exclusions, fence=lease.fence)
        if gone:
            current = [
                i for i in current if i.line is None or not any(o.session_id in gone for o in i.line.origins)
            ]
            continue
        try:
            commit_memory(snap, new_text, rt.paths.workspace)
        except WriteConflict:
            await store.write(rollback_rows, rt.agent_id, added, fence=lease.fence)
            warnings.append(f"{snap.relative_path} changed during the write; retried")
            continue
        except BaseException:
            await store.write(rollback_rows, rt.agent_id, added, fence=lease.fence)
            raise
        stale = old_keys - set(promotion_keys_in(new_text))
        if stale:
            await store.write(_prune, rt.agent_id, sorted(stale), fence=lease.fence)
        return len(lines), added, warnings
    return 0, [], [*warnings, f"diary block {name!r} left unchanged: the file kept changing"]
