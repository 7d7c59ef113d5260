"""Sealing a pending erasure's needles with a one-time key (standard library only).

    blob = seal(key, plaintext); plaintext = unseal(key, blob)

Encrypt-then-MAC: the keystream is SHAKE-256 over (key, nonce) — an extendable-output function
used as a stream cipher — and the tag is HMAC-SHA256 over (nonce, ciphertext) with a key
derived apart from the keystream's. Each key seals one journal and lives in its own file,
deleted when the erasure completes: from then on the sealed bytes, wherever a copy survives
(a free page, a WAL frame, a backup), cannot be read.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from memoryd.errors import OperationFailed

KEY_BYTES = 32
NONCE_BYTES = 16
TAG_BYTES = 32


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def _stream(key: bytes, nonce: bytes, n: int) -> bytes:
    return hashlib.shake_256(b"memoryd-seal-stream\0" + key + nonce).digest(n)


def _xor(data: bytes, stream: bytes) -> bytes:
    # One big-integer XOR instead of one per byte (a journal of a large subject is megabytes).
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def _mac_key(key: bytes) -> bytes:
    return hashlib.sha256(b"memoryd-seal-mac\0" + key).digest()


def seal(key: bytes, plaintext: bytes) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES)
    stream = _stream(key, nonce, len(plaintext))
    body = _xor(plaintext, stream)
    tag = hmac.new(_mac_key(key), nonce + body, hashlib.sha256).digest()
    return nonce + body + tag


def unseal(key: bytes, blob: bytes) -> bytes:
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise OperationFailed("erasure journal: sealed entry is truncated")
    nonce, body, tag = blob[:NONCE_BYTES], blob[NONCE_BYTES:-TAG_BYTES], blob[-TAG_BYTES:]
    want = hmac.new(_mac_key(key), nonce + body, hashlib.sha256).digest()
    if not hmac.compare_digest(tag, want):
        raise OperationFailed("erasure journal: sealed entry does not match its key (damaged or replaced)")
    stream = _stream(key, nonce, len(body))
    return _xor(body, stream)
