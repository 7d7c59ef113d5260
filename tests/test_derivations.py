"""One registry of derivations (daemon/derivations.py): no module hashes text or ids outside it,
and every derivation the verifier can make from a subject, stored anywhere, fails it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memoryd import derivations
from memoryd.retention.needles import derivation_inputs
from memoryd.retention.pieces import EXPORT_PREFIXES
from memoryd.store.inspect import integer_byte_forms

ROOT = Path(__file__).resolve().parents[1] / "daemon"

# Modules that may hash, each with why what it hashes is no derivation of memory text or ids.
NOT_DERIVATIONS = {
    "derivations.py": "the registry itself",
    "lock.py": "a lock's name: the hash of a workspace's path, no memory text or id",
    "retention/seal.py": "encryption of the erasure journal under the host key (a stream and a MAC)",
    "index/embedder.py": "the embedding cache's provider key: a hash of the configured base URL",
    "agents_api/transport.py": "a constant-time comparison of the HTTP bearer token; nothing stored",
}
HASHING_MODULES = ("hashlib", "hmac", "zlib", "binascii")


def _hashing_uses(tree: ast.AST) -> list[str]:
    """Imports of a hashing module and calls into one, by line."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in HASHING_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in HASHING_MODULES:
            found.append(f"{node.lineno}: from {node.module} import …")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
            and any(isinstance(a, ast.Constant) and a.value in HASHING_MODULES for a in node.args)
        ):
            found.append(f"{node.lineno}: __import__")
    return found


def test_no_module_hashes_text_or_ids_outside_the_registry() -> None:
    offenders: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        uses = _hashing_uses(ast.parse(path.read_text(), filename=str(path)))
        if uses and rel not in NOT_DERIVATIONS:
            offenders[rel] = uses
    assert not offenders, (
        "declare the derivation in daemon/derivations.py (the verifier then looks for it), or list "
        f"the module in NOT_DERIVATIONS with why it derives nothing: {offenders}"
    )


def test_the_scan_sees_a_hash_written_outside_the_registry() -> None:
    planted = "import hashlib\n\ndef key(text):\n    return hashlib.sha1(text.encode()).hexdigest()\n"
    assert _hashing_uses(ast.parse(planted)) == ["1: import hashlib"]
    assert _hashing_uses(ast.parse("from hmac import new\n")) == ["1: from hmac import …"]


def test_every_module_listed_as_no_derivation_still_hashes() -> None:
    for rel in NOT_DERIVATIONS:
        assert _hashing_uses(ast.parse((ROOT / rel).read_text())), f"{rel}: hashes nothing now; drop it"


def test_every_entry_says_how_the_verifier_derives_it_or_why_it_cannot() -> None:
    names = [d.name for d in derivations.REGISTRY]
    assert len(names) == len(set(names))
    for d in derivations.REGISTRY:
        assert d.stored_in
        assert bool(d.reason) == (d.source == "not derivable"), d.name


def test_the_writers_call_the_registry() -> None:
    from memoryd import fileio
    from memoryd.dreaming import text
    from memoryd.ingest import staging
    from memoryd.retention import content
    from memoryd.store import erased_senders, tombstones

    assert staging.claim_hash is derivations.claim_hash is text.claim_hash
    assert staging.query_hash is derivations.query_hash
    assert content.content_hash is derivations.content_hash
    assert tombstones.hashed_session_ref is derivations.hashed_session_ref
    assert erased_senders.sender_ref is derivations.erased_sender_ref
    assert fileio.sha256_hex is derivations.bytes_digest


MESSAGE = "Remember  that the violet mongoose launch\tis on Friday at noon, Ｎｏｒａ says."


@pytest.mark.parametrize("entry", [d.name for d in derivations.REGISTRY if d.source == "text"])
def test_each_text_derivation_of_each_stored_form_is_a_needle(entry: str) -> None:
    """What the sweep, the index and the retention store hash (the exported line cut as a staged
    snippet, the text as written, …) is what the verifier looks for, truncated and in any case."""
    from memoryd.constants import SNIPPET_MAX_CHARS
    from memoryd.retention.needles import VerifySubject, compile_needles
    from memoryd.utf16 import truncate_utf16

    d = derivations.BY_NAME[entry]
    needles = compile_needles(VerifySubject(contents=(MESSAGE,)))
    staged = truncate_utf16(EXPORT_PREFIXES[0] + " ".join(MESSAGE.split()), SNIPPET_MAX_CHARS)
    for form in (MESSAGE, staged, *sorted(derivation_inputs(MESSAGE))):
        derived = d.function(form)
        if type(derived) is int:  # an integer: as a stored integer value, and as its stored bytes
            assert derived in needles.numbers, (entry, form)
            for stored in integer_byte_forms(derived):
                assert needles.hits_bytes(b"\x01" + stored + b"\x02") >= 1, (entry, form)
            continue
        value = str(derived)
        assert needles.hits(f"x {value} y") >= 1, (entry, form)
        assert needles.hits(f"x {value[:12].upper()} y") >= 1, (entry, form)


@pytest.mark.parametrize("number", [1 << 35, 300 << 30, (1 << 47) - 1, 1 << 47, (1 << 48) - 1])
def test_an_integer_form_is_found_as_sqlite_stores_it(tmp_path: Path, number: int) -> None:
    """The bytes integer_byte_forms gives are in the file where SQLite keeps the integer: in a
    record (a column, an index key) and as a rowid."""
    from memoryd.store.db import sqlite3

    conn = sqlite3.connect(str(tmp_path / "n.sqlite"), isolation_level=None)
    conn.execute("CREATE TABLE r (n INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE c (x TEXT, n INTEGER)")
    conn.execute("INSERT INTO r VALUES (?)", (number,))
    conn.execute("INSERT INTO c VALUES ('x', ?)", (number,))
    conn.close()
    record, varint = integer_byte_forms(number)
    pages = (tmp_path / "n.sqlite").read_bytes()
    assert varint in pages[4096:8192], "the rowid's varint"
    assert record in pages[8192:], "the column's record bytes"


def test_an_integer_too_small_for_a_safe_needle_has_no_byte_form() -> None:
    assert integer_byte_forms(0) == integer_byte_forms(1 << 30) == ()
    assert len(integer_byte_forms(1 << 33)) == 1  # 6 record bytes; its varint is 5
    with pytest.raises(ValueError):
        integer_byte_forms(1 << 48)
