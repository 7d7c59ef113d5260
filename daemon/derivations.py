"""Every way memoryd turns text or ids into a stored value, declared once.

A derivation is a function whose output is stored (a key, a hash column, a file name, a job
id) and whose input is memory text or an id. Writers call the functions below; the erasure
verifier (retention/needles.py) reads `REGISTRY` to know which values a subject's messages
and ids turn into, so a derivation added here is looked for the day it is written. A module
that hashes text or ids anywhere else fails tests/test_derivations.py (an AST scan of daemon/,
with each non-derivation use listed there with its reason).

Each entry says how the verifier derives it from an erased subject:

* `text` — from each form of each erased message (retention/pieces.py message_forms, and the
  staged snippet: the exported line cut at SNIPPET_MAX_CHARS), looked for in every byte the
  verifier reads (also truncated to VERIFY_HASH_PREFIX_CHARS, in any case); a derivation that
  makes an integer is looked for as every integer value of every table and as the bytes SQLite
  stores it in (store/inspect.py `integer_byte_forms`);
* `id` — from each of the subject's ids;
* `not derivable` — with the reason: a keyed hash (only the holder of the key links it, and
  some are kept on purpose: hashed forgotten records, erased senders), or an input the subject
  does not give (a whole file's bytes, a day, a payload). Such values are removed with what
  they key, by forget and erase, and checked there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

HASHED_PREFIX = "hmac:"  # keyed hashes that stand for an id (forgotten records, erased senders)

_WS = re.compile(r"\s+")


def normalize_snippet(snippet: str) -> str:
    r"""The reference's normalizeSnippet, `s.trim().replace(/\s+/g, " ")`."""
    trimmed = snippet.strip()
    # Already normal (the sweep's snippets are): printable means no whitespace but ASCII spaces.
    if "  " not in trimmed and trimmed.isprintable():
        return trimmed
    return _WS.sub(" ", trimmed)


def normalize_content(content: str) -> str:
    """A memory-tool object's content as its provenance hash sees it (the seed: stripped,
    lower-cased)."""
    return content.strip().lower()


# --- derivations of text ------------------------------------------------------------------------


def claim_hash(snippet: str) -> str:
    """A staged message's daily-claim key, `memory:claim:<this>` (reference §1): sha1 of the
    normalised snippet, 12 hex characters."""
    return hashlib.sha1(normalize_snippet(snippet).encode("utf-8"), usedforsecurity=False).hexdigest()[:12]


def claim_number(snippet: str) -> int:
    """A staged message's claim as an integer key: the 48 bits of its claim hash. SQLite stores
    it in a record as 6 or 8 big-endian bytes and as a rowid in a varint (store/inspect.py
    `integer_byte_forms`: the verifier looks for each)."""
    return int(claim_hash(snippet), 16)


def query_hash(query: str) -> str:
    """A recall query's key in staged entries' query hashes."""
    return hashlib.sha1(query.lower().encode("utf-8"), usedforsecurity=False).hexdigest()[:12]


def content_hash(content: str) -> str:
    """A provenance edge's hash of its parent's content (seed 001)."""
    return hashlib.sha256(normalize_content(content).encode("utf-8")).hexdigest()


def chunk_hash(text: str) -> str:
    """An index chunk's hash: the embedding cache's key."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- derivations the subject alone does not give ----------------------------------------------------


def seen_hash(scope: str, basis: str, snippet: str) -> str:
    """The reference's message hash (a session's seen set): scope, basis (`ts:<ms>` or
    `line:<n>`) and the snippet."""
    return hashlib.sha1(f"{scope}\n{basis}\n{snippet}".encode(), usedforsecurity=False).hexdigest()


def chunk_id(key: str) -> str:
    """An index chunk's id, from `source:path:start:end:chunk_hash:model`."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def diary_digest(day: str, text: str) -> str:
    """A dream diary line's key, `memory:<kind>:<this>`: the day and the line."""
    return hashlib.sha256(json.dumps([day, text], ensure_ascii=False).encode("utf-8")).hexdigest()


def request_digest(canonical: bytes) -> str:
    """The token of a request id's job id, `<family>:req:<this>`, of the canonical [family,
    request id]: never of the payload (daemon/runtime/wire.py)."""
    return hashlib.sha256(b"memoryd request id\0" + canonical).hexdigest()


def erasure_digest(request_id: str) -> str:
    """The id of a deployment-wide erasure sent under a request id (daemon/runtime/erasure_fanout.py):
    the same request is the same erasure, without storing the request id."""
    return hashlib.sha256(b"memoryd-erasure\0" + request_id.encode()).hexdigest()[:32]


def request_fingerprint(request_id: str, canonical: bytes) -> str:
    """What tells two payloads sent under one request id apart: an HMAC of the canonical [family,
    payload] keyed by the request id, which Redis never holds."""
    return hmac.new(request_id.encode(), canonical, hashlib.sha256).hexdigest()


def path_digest(path: str) -> str:
    """A default deployment id's tail: a state directory's path, 12 hex characters."""
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def bytes_digest(data: bytes | str) -> str:
    """sha256 hex of a whole file's or document's bytes: the expected hash of an atomic write,
    a preimage's and a checkpoint's content hash."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def word_hash(word: str) -> int:
    """A word's 64-bit number in dreaming's similarity sketches (dreaming/sketch.py): held in
    memory while one phase groups its entries, never stored."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def transcript_hasher() -> hashlib._Hash:
    """The running sha256 of a transcript's consumed lines (a checkpoint's content hash)."""
    return hashlib.sha256()


def hashed_session_ref(secret: bytes, session_id: str) -> str:
    """A forgotten-session record kept as a keyed hash (after an erasure)."""
    return HASHED_PREFIX + hmac.new(secret, session_id.encode("utf-8"), hashlib.sha256).hexdigest()


def erased_session_ref(secret: bytes, session_id: str) -> str:
    """A session that lost an erased sender, as a keyed hash."""
    return (
        HASHED_PREFIX
        + hmac.new(secret, b"erased-senders\0" + session_id.encode(), hashlib.sha256).hexdigest()
    )


def erased_sender_ref(secret: bytes, session_id: str, sender: str) -> str:
    """An erased sender of a session, as a keyed hash."""
    message = f"{session_id}\0{sender}".encode()
    return HASHED_PREFIX + hmac.new(secret, b"erased-sender\0" + message, hashlib.sha256).hexdigest()


def erased_subject_ref(secret: bytes, sender: str) -> str:
    """A sender erased from every session of an agent, as a keyed hash (another domain than
    `erased_sender_ref`)."""
    return HASHED_PREFIX + hmac.new(secret, b"erased-subject\0" + sender.encode(), hashlib.sha256).hexdigest()


def journal_ref(key: bytes, target: str) -> str:
    """A pending erasure's journal entry, keyed by its scope under the host key."""
    return "hmac:" + hmac.new(key, target.encode(), hashlib.sha256).hexdigest()


# --- the registry ---------------------------------------------------------------------------------

Source = Literal["text", "id", "not derivable"]


@dataclass(frozen=True, slots=True)
class Derivation:
    name: str
    source: Source
    function: Callable[..., object]
    stored_in: str  # where memoryd keeps it
    reason: str = ""  # why the verifier cannot derive it from a subject (`not derivable` only)


REGISTRY: tuple[Derivation, ...] = (
    Derivation(
        "claim_hash",
        "text",
        claim_hash,
        "short_term_entries.claim_hash, memory:claim:<hash> keys, suppressed_claims.claim_hash",
    ),
    Derivation(
        "claim_number",
        "text",
        claim_number,
        "ingest_lines.claim (and its index)",
    ),
    Derivation("query_hash", "text", query_hash, "short_term_entries.query_hashes"),
    Derivation("content_hash", "text", content_hash, "retention_objects.content_hash, provenance_hash"),
    Derivation("chunk_hash", "text", chunk_hash, "memory_index_chunks.hash, memory_embedding_cache.hash"),
    Derivation(
        "seen_hash",
        "not derivable",
        seen_hash,
        "ingest_lines.seen",
        "the session's scope and each message's time are part of it; dropped with the session",
    ),
    Derivation(
        "chunk_id", "not derivable", chunk_id, "memory_index_chunks.id", "a file path and line numbers"
    ),
    Derivation("diary_digest", "not derivable", diary_digest, "dream diary keys", "the day of the entry"),
    Derivation(
        "request_digest",
        "not derivable",
        request_digest,
        "arq job and result keys of a request id's job",
        "the caller's request id, never the payload",
    ),
    Derivation(
        "erasure_digest",
        "not derivable",
        erasure_digest,
        "memoryd:erasure:<id> keys",
        "the caller's request id, never the subject",
    ),
    Derivation(
        "request_fingerprint",
        "not derivable",
        request_fingerprint,
        "memoryd:request:<job id> values",
        "keyed with the caller's request id, which Redis never holds",
    ),
    Derivation(
        "path_digest",
        "not derivable",
        path_digest,
        "agent routes (memoryd:agents), as the default daemon.deployment_id",
        "a state directory's path, no memory text or id",
    ),
    Derivation(
        "bytes_digest",
        "not derivable",
        bytes_digest,
        "memory_backups.content_hash, checkpoints, file write checks",
        "a whole file's bytes",
    ),
    Derivation(
        "transcript_hasher",
        "not derivable",
        transcript_hasher,
        "checkpoints.content_hash",
        "a whole transcript prefix",
    ),
    Derivation(
        "word_hash",
        "not derivable",
        word_hash,
        "nowhere: the memory of one dreaming phase",
        "never stored, so no byte the verifier reads can hold it",
    ),
    Derivation(
        "hashed_session_ref",
        "not derivable",
        hashed_session_ref,
        "memory_session_tombstones.session_id",
        "keyed with the agent's secret; kept on purpose after an erasure",
    ),
    Derivation(
        "erased_session_ref",
        "not derivable",
        erased_session_ref,
        "erased_senders.session_ref",
        "keyed with the agent's secret; kept on purpose after an erasure",
    ),
    Derivation(
        "erased_sender_ref",
        "not derivable",
        erased_sender_ref,
        "erased_senders.sender_ref",
        "keyed with the agent's secret; kept on purpose after an erasure",
    ),
    Derivation(
        "erased_subject_ref",
        "not derivable",
        erased_subject_ref,
        "erased_senders.sender_ref (agent-wide rows)",
        "keyed with the agent's secret; kept on purpose after an erasure",
    ),
    Derivation(
        "journal_ref",
        "not derivable",
        journal_ref,
        "retention_journal",
        "keyed with the host's retention key; deleted with the receipt",
    ),
)

BY_NAME = {d.name: d for d in REGISTRY}
