"""The erasure verifier: "a successful erasure receipt is not proof of erasure; verify the
derivability invariant, not the reference-count invariant" (seed 001).

Checks, over `retention.sqlite`, every agent store and every agent workspace:
* provenance_invariant — no provenance edge is left dangling, no tombstoned edge keeps a
  hash or a sub-day time, and every tombstone is an opaque random token of its own edge
  (needs no subject; `memoryd verify` runs it any time);
* derivability — no live row (any table: staged entries, index rows, cache rows, preimages,
  forgotten records, receipts …) or workspace file (memory files, diaries, corpus lines)
  holds the subject's ids, a hash form of its content (also truncated), an exact snippet of
  it, or a sub-day time tied to it;
* derivability also reads every integer column: a sub-day time of an erased object there
  (a scope's `created_at`, a provenance time) is tied to the subject, and so is an integer
  derivation of its text (a claim number, daemon/derivations.py); the physical check looks for
  such an integer's stored bytes too;
* physical — no snippet's bytes in a database file (pages in use, free pages, slack), its WAL
  or journal, as the erasure left them and again after `wal_checkpoint(TRUNCATE)`, FTS5
  'optimize' and VACUUM (a hit is placed: page, free page, WAL frame);
* fts_segments — the full-text index holds no row whose chunk is gone and no erased term its
  chunk lacks, read from the index segments themselves (fts5vocab);
* redis — no key name or value of the database (job arguments, results, anything else)
  holds the subject's ids or text, read as bytes (erasure requests aside);
* embeddings — no stored vector or cached embedding is the embedding of an erased snippet
  (with the configured embedder; skipped, and said so, when none is configured).

Compaction writes, so each store is compacted and read under its own lock: the retention
lease for `retention.sqlite`, the workspace lease for an agent's store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio
import numpy as np
from arq.constants import job_key_prefix
from redis.asyncio import Redis

from memoryd.agent_runtime import agent_runtime
from memoryd.agents import agent_paths, agents_with_state
from memoryd.constants import TOMBSTONE_REF_PREFIX, TOMBSTONE_REF_RANDOM_BYTES, VERIFY_EMBEDDING_MIN_COSINE
from memoryd.errors import OperationFailed, UsageError
from memoryd.failpoints import failpoint
from memoryd.fileio import read_bytes_nofollow
from memoryd.redis_values import PREFIXES, family_of, is_erasure_request, is_pending_purge
from memoryd.retention.needles import Needles, VerifySubject, compile_needles, fts_terms, snippets
from memoryd.retention.raw_bytes import raw_hits
from memoryd.retention.receipts import NO_SUBJECT, ErasureReceipt, Verification, VerificationCheck
from memoryd.retention.redis_bytes import every_key
from memoryd.retention.state import open_for_read, open_for_write, retention_db_path
from memoryd.settings import Settings
from memoryd.store import retention as repo
from memoryd.store.db import Connection, Store
from memoryd.store.embedding_cache import all_cached_embeddings
from memoryd.store.index_vectors import all_embeddings
from memoryd.store.inspect import chunk_texts, compact, fts_index_terms, stored_integers, stored_values
from memoryd.store.raw_files import is_sqlite_file, read_outside

# TOMBSTONE:<random hex>, as store/retention.py's rewrite makes it; anything else may be derived.
OPAQUE_TOMBSTONE = re.compile(
    re.escape(TOMBSTONE_REF_PREFIX) + f"[0-9a-f]{{{2 * TOMBSTONE_REF_RANDOM_BYTES}}}"
)


@dataclass
class _Findings:
    """Per check: location -> number of hits."""

    derivability: dict[str, int] = field(default_factory=dict)
    physical: dict[str, int] = field(default_factory=dict)
    embeddings: dict[str, int] = field(default_factory=dict)
    invariant: dict[str, int] = field(default_factory=dict)
    fts: dict[str, int] = field(default_factory=dict)
    redis: dict[str, int] = field(default_factory=dict)
    queued_purges: set[str] = field(default_factory=set)  # ids of queued purge jobs naming the subject
    physical_notes: list[str] = field(default_factory=list)
    vectors_seen: int = 0  # stored vectors and cached embeddings, compared or not

    @staticmethod
    def add(bucket: dict[str, int], where: str, n: int) -> None:
        if n:
            bucket[where] = bucket.get(where, 0) + n


# --- row scans ----------------------------------------------------------------------------------


def _scan_rows(conn: Connection, needles: Needles) -> dict[str, int]:
    """Every text/blob value of every ordinary table (FTS/vec shadow tables included), and
    every integer value that is a sub-day time of the subject (a column that holds times) or
    one of its integer derivations (a claim number)."""
    hits: dict[str, int] = {}
    for table, column, value in stored_values(conn):
        n = needles.hits(value)
        if n:
            key = f"{table}.{column}"
            hits[key] = hits.get(key, 0) + n
    if needles.times or needles.numbers:
        for table, column, number in stored_integers(conn):
            if number in needles.times or number in needles.numbers:
                key = f"{table}.{column}"
                hits[key] = hits.get(key, 0) + 1
    return hits


def _fts_residue(conn: Connection, needles: Needles) -> dict[str, int]:
    """What the FTS5 index segments hold that their chunks do not: rows whose chunk is gone
    (subject or not), and the subject's terms in a row whose chunk text lacks them."""
    texts = chunk_texts(conn)
    words: dict[int, set[str]] = {}
    hits: dict[str, int] = {}
    for table, doc, term in fts_index_terms(conn):
        if doc not in texts:
            where = f"{table}: index rows without a chunk"
        elif term in needles.terms and term not in words.setdefault(doc, fts_terms(texts[doc])):
            where = f"{table}: erased terms in index segments"
        else:
            continue
        hits[where] = hits.get(where, 0) + 1
    return hits


def _retention_invariant(conn: Connection) -> dict[str, int]:
    """Provenance edges that break the erasure invariant whatever the subject: dangling or
    derivable edges, and tombstones that are not opaque (a random token, one per edge)."""
    invariant: dict[str, int] = {}

    def add(what: str) -> None:
        key = f"retention_objects: {what}"
        invariant[key] = invariant.get(key, 0) + 1

    for _, what in repo.derivable_edges(conn):
        add(what)
    seen: set[str] = set()
    for parent in repo.tombstone_parents(conn):
        if not OPAQUE_TOMBSTONE.fullmatch(parent):
            add("tombstone is not an opaque random token")
        elif parent in seen:
            add("tombstone shared by several edges (links their children)")
        seen.add(parent)
    return invariant


def _vectors(conn: Connection) -> list[tuple[str, bytes]]:
    out = [("memory_index_vectors", blob) for blob in all_embeddings(conn)]
    out += [("memory_embedding_cache", blob) for blob in all_cached_embeddings(conn)]
    return out


def embedding_hits(stored: list[tuple[str, bytes]], probes: np.ndarray | None) -> dict[str, int]:
    """Stored vectors that are (to float precision) the embedding of an erased snippet."""
    hits: dict[str, int] = {}
    if probes is None or not len(probes):
        return hits
    dims = probes.shape[1]
    for table, blob in stored:
        if not isinstance(blob, bytes) or len(blob) != dims * 4:
            continue
        vec = np.frombuffer(blob, dtype="<f4")
        norm = float(np.linalg.norm(vec))
        if norm == 0:
            continue
        if float(np.max(probes @ (vec / norm))) >= VERIFY_EMBEDDING_MIN_COSINE:
            hits[f"{table}.embedding"] = hits.get(f"{table}.embedding", 0) + 1
    return hits


# --- workspaces ---------------------------------------------------------------------------------


def _scan_workspace(workspace: Path, needles: Needles) -> dict[str, int]:
    hits: dict[str, int] = {}
    if not needles.searches_text:
        return hits
    for root, dirs, files in os.walk(workspace, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in files:
            path = Path(root) / name
            if path.is_symlink():
                continue
            data = _read_file(path, hits, str(path.relative_to(workspace)))
            if data is None:
                continue
            n = needles.hits_bytes(data)
            if needles.exact:
                lines = data.decode("utf-8", "replace").splitlines()
                n += sum(1 for line in lines if line in needles.exact)
            if n:
                hits[str(path.relative_to(workspace))] = n
    return hits


_STORE_SUFFIXES = ("", "-wal", "-journal")  # read by the physical check, each hit placed


def _read_file(path: Path, hits: dict[str, int], where: str) -> bytes | None:
    """A file's bytes; a SQLite file (a scratch database, a -shm index) by a child process, so
    no descriptor of ours drops the locks of this process's connections (store/raw_files.py).

    None when it holds no bytes of its own (gone, a FIFO or a socket). A file that is there but
    cannot be read is counted in `hits` at `where (unreadable)`: the check fails there, since an
    unread file is not a clean one."""
    try:
        failpoint("verify.read")
        return read_outside(path) if is_sqlite_file(path) else read_bytes_nofollow(path)
    except UsageError:  # not a regular file (nothing is followed)
        return None
    except OperationFailed:
        key = f"{where} (unreadable)"
        hits[key] = hits.get(key, 0) + 1
        return None


def _scan_state_files(root: Path, skip: set[Path], stores: set[Path], needles: Needles) -> dict[str, int]:
    """Every other file under `root` (the state directory, or an agent's), as bytes: keys,
    journals, logs, temp files of interrupted writes, anything a later change puts there.
    `skip`: directories scanned on their own (workspaces, scratch); `stores`: database files."""
    hits: dict[str, int] = {}
    if not root.is_dir():
        return hits
    skipped = {str(p) for p in skip}
    store_files = {f"{p}{suffix}" for p in stores for suffix in _STORE_SUFFIXES}
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [
            d
            for d in dirs
            if os.path.join(dirpath, d) not in skipped and not os.path.islink(os.path.join(dirpath, d))
        ]
        for name in files:
            path = os.path.join(dirpath, name)
            if path in store_files or os.path.islink(path):
                continue
            where = f"state_dir:{Path(path).parent.relative_to(root).as_posix()}"
            data = _read_file(Path(path), hits, where)
            if data is None:
                continue
            n = needles.hits_value(data) if needles.searches_text else 0
            if n:
                hits[where] = hits.get(where, 0) + n
    return hits


# --- the run -------------------------------------------------------------------------------------


class Embedder(Protocol):
    """What the embeddings check needs of the index's embedder (memoryd.index.embedder), which the
    caller hands in: retention sits below the index and does not import it."""

    model: str

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]: ...


async def _probe_vectors(
    settings: Settings, subject: VerifySubject, embedder: Embedder | None
) -> tuple[np.ndarray | None, str]:
    if embedder is None:
        return None, "no embedder configured (index.embedding.provider = none): no vectors are stored"
    texts = list(dict.fromkeys([*snippets(subject.contents), *(c for c in subject.contents if c.strip())]))
    if not texts:
        return np.zeros(
            (0, settings.index.embedding.dims), dtype=np.float32
        ), f"{embedder.model}: nothing to embed"
    vectors = await embedder.embed(texts)
    return np.vstack([np.asarray(v, dtype=np.float32) for v in vectors]), f"compared with {embedder.model}"


async def _check_store(
    store: Store,
    label: str,
    needles: Needles,
    probes: np.ndarray | None,
    findings: _Findings,
    *,
    retention: bool,
) -> None:
    # Raw bytes as the erasure left them (free pages and WAL frames included), then compacted.
    # Whole files are read and searched: off the event loop, which serves other jobs meanwhile.
    for where, n in (await anyio.to_thread.run_sync(raw_hits, store.path, needles)).items():
        findings.add(findings.physical, f"{label}:{where}", n)
    problem = await store.run(compact)
    if problem:
        findings.physical_notes.append(f"{label}: {problem}")
        findings.add(findings.physical, f"{label}: compaction", 1)
    for where, n in (await store.read(_scan_rows, needles)).items():
        findings.add(findings.derivability, f"{label}:{where}", n)
    if retention:
        for where, n in (await store.read(_retention_invariant)).items():
            findings.add(findings.invariant, f"{label}:{where}", n)
    else:  # vectors and the full-text index live in agent stores only
        stored = await store.read(_vectors)
        findings.vectors_seen += len(stored)
        for where, n in embedding_hits(stored, probes).items():
            findings.add(findings.embeddings, f"{label}:{where}", n)
        for where, n in (await store.run(_fts_residue, needles)).items():
            findings.add(findings.fts, f"{label}:{where}", n)
    for where, n in (await anyio.to_thread.run_sync(raw_hits, store.path, needles)).items():
        findings.add(findings.physical, f"{label}:{where} after compaction", n)


QUEUED_PURGE = "redis:queued purge job"


def _redis_family(key: bytes) -> str:
    """Where a Redis hit is, without its id: `redis:arq:result`, or `redis:other keys`."""
    name = key.decode("utf-8", "replace")
    return f"redis:{family_of(name)}" if name.startswith(PREFIXES) else "redis:other keys"


async def _check_redis(redis: Redis, needles: Needles, findings: _Findings) -> None:
    """Every key of the database, its name and every value as bytes, JSON opened (erasure
    requests aside: they must name their subject while queued or running, and their results
    keep no arguments)."""
    if not needles.searches_text:
        return
    async for key, values in every_key(redis):
        if is_erasure_request(key.decode("utf-8", "replace")):
            continue
        n = sum(needles.hits_value(v) for v in (key, *values))
        if not n:
            continue
        if is_pending_purge(key, values[:1]):  # the record itself, not the strings it holds
            # No purge deletes another: it names the subject until it has run (settle.py).
            findings.queued_purges.add(key[len(job_key_prefix) :].decode("utf-8", "replace"))
        else:
            findings.add(findings.redis, _redis_family(key), n)


REDIS_NOTE = "every key name and value of the database, as bytes"


async def recheck_redis(redis: Redis, needles: Needles, verification: Verification) -> Verification:
    """`verification` with its redis check run again now (after another purge by the erasure)."""
    findings = _Findings()
    await _check_redis(redis, needles, findings)
    fresh = _redis_check(findings)
    checks = [fresh if c.name == "redis" else c for c in verification.checks]
    return verification.model_copy(
        update={
            "checks": checks,
            "verified": all(c.passed for c in checks),
            "waiting_for": sorted(findings.queued_purges),
        }
    )


def _redis_check(findings: _Findings, *, skipped: str | None = None) -> VerificationCheck:
    """Failed where anything but a queued purge names the subject; `waiting` where only queued
    purges do (their ids go on the verification, which passes once they have run)."""
    if skipped is None and not findings.redis and findings.queued_purges:
        return VerificationCheck(
            name="redis",
            status="waiting",
            count=0,
            locations=[QUEUED_PURGE],
            note=f"{REDIS_NOTE}; {len(findings.queued_purges)} queued purge job(s) name the subject",
        )
    return _check("redis", findings.redis, skipped=skipped, note=REDIS_NOTE)


def _check(
    name: str, bucket: dict[str, int], *, skipped: str | None = None, note: str = ""
) -> VerificationCheck:
    """A check's result; `skipped` (the reason) when it could not run, which is not a pass."""
    if skipped is not None:
        return VerificationCheck(name=name, status="skipped", count=0, note=skipped)  # type: ignore[arg-type]
    count = sum(bucket.values())
    return VerificationCheck(
        name=name,  # type: ignore[arg-type]
        status="failed" if count else "passed",
        count=count,
        locations=sorted(bucket),
        note=note,
    )


def _embeddings_check(
    findings: _Findings, probes: np.ndarray | None, note: str, subject: VerifySubject
) -> VerificationCheck:
    if subject.empty:
        return _check("embeddings", {}, skipped=NO_SUBJECT)
    if probes is None:  # no embedder: only a store without vectors has nothing to compare
        if findings.vectors_seen:
            return _check(
                "embeddings",
                {},
                skipped=f"{findings.vectors_seen} stored vectors, but no embedder is configured to compare them with",
            )
        return _check("embeddings", {}, note=note)
    return _check("embeddings", findings.embeddings, note=note)


async def _check_state_files(
    settings: Settings, agents: Sequence[str] | None, needles: Needles, findings: _Findings
) -> None:
    """Every other file under the state directory (an agent's, for a forget), as bytes."""
    root = settings.state_dir if agents is None else None
    roots = [root] if root is not None else [agent_paths(settings, a).state_dir for a in agents or ()]
    every_agent = agents_with_state(settings) if agents is None else list(agents)
    skip = {settings.workspace_for(a) for a in every_agent} | {
        agent_paths(settings, a).scratch_dir for a in every_agent
    }
    stores = {retention_db_path(settings)} | {agent_paths(settings, a).db_path for a in every_agent}
    for top in roots:
        files = await anyio.to_thread.run_sync(_scan_state_files, top, skip, stores, needles)
        for where, n in files.items():
            findings.add(findings.derivability, where, n)


async def run_verify(
    settings: Settings,
    redis: Redis,
    subject: VerifySubject | None = None,
    *,
    embedder: Embedder | None,
    receipt_id: str | None = None,
    agents: Sequence[str] | None = None,
    needles: Needles | None = None,
) -> Verification:
    """Run every check; `verified` is true only when all pass.

    Without a subject (the CLI's `memoryd verify`) only the subject-free parts can run: the
    provenance invariant, compaction and stale index rows; derivability, embeddings and redis
    are `skipped`. The receipt of an erasure carries the full run made with its subject.
    `agents`: only these agents' stores and workspaces (forget is per agent; another agent's
    data is not its residue), and not retention.sqlite. `needles`: the subject's, compiled
    already by the caller.
    """
    if receipt_id is not None:
        await _receipt_exists(settings, receipt_id)
    subject = subject or VerifySubject()
    if needles is None:
        needles = await anyio.to_thread.run_sync(compile_needles, subject)
    findings = _Findings()
    probes, embed_note = (
        (None, NO_SUBJECT) if subject.empty else await _probe_vectors(settings, subject, embedder)
    )

    if agents is None and retention_db_path(settings).exists():
        async with open_for_write(settings, redis) as (store, _lease):
            await _check_store(store, "retention", needles, probes, findings, retention=True)
    for agent in agents_with_state(settings) if agents is None else agents:
        paths = agent_paths(settings, agent)
        if paths.db_path.exists():
            async with agent_runtime(settings, agent, redis=redis) as rt, rt.lock().hold():
                await _check_store(
                    rt.require_store(), f"agent {agent}", needles, probes, findings, retention=False
                )
        if paths.workspace.is_dir():
            workspace = await anyio.to_thread.run_sync(_scan_workspace, paths.workspace, needles)
            for where, n in workspace.items():
                findings.add(findings.derivability, f"agent {agent}:workspace/{where}", n)
        if paths.scratch_dir.is_dir():  # the parallel scan's files (SQLite pages: raw bytes)
            scratch = await anyio.to_thread.run_sync(_scan_workspace, paths.scratch_dir, needles)
            for where, n in scratch.items():
                findings.add(findings.physical, f"agent {agent}:{paths.scratch_dir.name}/{where}", n)

    physical_note = "; ".join(findings.physical_notes) or (
        f"{needles.piece_count} pieces and {needles.hash_count} hash prefixes searched in database, "
        "WAL and journal bytes, before and after compaction"
        if needles.matcher is not None
        else "compacted; no piece of the subject's text to search for"
    )
    await _check_state_files(settings, agents, needles, findings)
    if not subject.empty:
        await _check_redis(redis, needles, findings)
    no_subject = NO_SUBJECT if subject.empty else None
    checks = [
        _check("provenance_invariant", findings.invariant),
        _check("derivability", findings.derivability, skipped=no_subject),
        _check("physical", findings.physical, note=physical_note),
        _check("fts_segments", findings.fts, note="index segments read through fts5vocab"),
        _embeddings_check(findings, probes, embed_note, subject),
        _redis_check(findings, skipped=no_subject),
    ]
    verification = Verification(
        receipt_id=receipt_id,
        verified=all(c.passed for c in checks),
        checks=checks,
        waiting_for=sorted(findings.queued_purges) if no_subject is None else [],
    )
    if receipt_id is not None:
        await attach_verification(settings, redis, receipt_id, verification)
    return verification


async def _receipt_exists(settings: Settings, receipt_id: str) -> None:
    async with open_for_read(settings) as store:
        if store is None or not await store.read(repo.receipt_bodies, receipt_id):
            raise UsageError(f"receipt: no erasure receipt {receipt_id!r}")


async def attach_verification(
    settings: Settings, redis: Redis, receipt_id: str, verification: Verification
) -> None:
    """Record a later verification run on its receipt (the receipt's own run stays the first)."""
    async with open_for_write(settings, redis) as (store, lease):
        bodies = await store.read(repo.receipt_bodies, receipt_id)
        if not bodies:
            raise UsageError(f"receipt: no erasure receipt {receipt_id!r}")
        receipt = ErasureReceipt.model_validate_json(bodies[0])
        if receipt.verification is None or receipt.state in ("refused", "not_found"):
            return
        # A later run without the subject can only find a failure, never confirm a pass: after
        # one, the queued purges the receipt waited for can no longer make it verified either.
        updated = receipt.model_copy(update={"verified": receipt.verified and not verification.failed})
        if verification.failed and receipt.verification.waiting_for:
            updated = updated.model_copy(
                update={"verification": receipt.verification.model_copy(update={"waiting_for": []})}
            )
        body = updated.model_dump_json(by_alias=True)
        await store.write(repo.update_receipt_body, receipt_id, body, fence=lease.fence)
