"""MinHash sketches of word sets and their LSH bands: which group heads may be similar to an
entry when the exact prefix filter (dreaming/selection.py) would name nearly all of them.

Each set gets SKETCH_PERMUTATIONS minimum hashes (one seeded multiply-xor permutation of its
words' 64-bit numbers each); two sets agree on one of them with probability equal to their
Jaccard similarity. The values are cut into `bands` of `rows`, chosen per threshold so that a
pair exactly at it shares a band with probability at least 1 - SKETCH_MISS_AT_THRESHOLD; a more
similar pair is likelier still, a much less similar one rarely shares any. Deterministic (a
fixed seed), pure, numpy for the arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memoryd.constants import SKETCH_MISS_AT_THRESHOLD, SKETCH_PERMUTATIONS, SKETCH_SEED
from memoryd.derivations import word_hash

_CHUNK_WORDS = 1 << 16  # words hashed at once: bounds the (words x permutations) array to 32 MiB
_EMPTY = np.iinfo(np.uint64).max  # an empty set's values: equal to every other empty set's


def band_shape(threshold: float, permutations: int = SKETCH_PERMUTATIONS) -> tuple[int, int]:
    """(bands, rows per band): the most rows (fewest chance candidates) with which a pair at the
    threshold still shares a band with probability >= 1 - SKETCH_MISS_AT_THRESHOLD."""
    t = min(max(threshold, 0.0), 1.0)
    for rows in range(permutations, 0, -1):
        bands = permutations // rows
        if (1.0 - t**rows) ** bands <= SKETCH_MISS_AT_THRESHOLD:
            return bands, rows
    return permutations, 1  # a threshold near 0: one value per band, the likeliest to meet


def band_keys(sets: Sequence[frozenset[str]], threshold: float) -> list[list[int]]:
    """Each set's band keys (one int per band): two sets share a key of the same band when their
    sketches agree on that whole band (or, at 2^-64, by chance)."""
    bands, rows = band_shape(threshold)
    signatures = _signatures(sets)[:, : bands * rows].reshape(len(sets), bands, rows)
    # Fold each band's values into one number (a multiply-xor chain; wraps mod 2^64).
    keys = np.zeros((len(sets), bands), dtype=np.uint64)
    fold = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        for r in range(rows):
            keys = (keys ^ signatures[:, :, r]) * fold
    out: list[list[int]] = keys.tolist()
    return out


def _signatures(sets: Sequence[frozenset[str]]) -> np.ndarray:
    """(sets x SKETCH_PERMUTATIONS) minimum hashes."""
    rng = np.random.default_rng(SKETCH_SEED)
    xor = rng.integers(0, 2**64 - 1, size=SKETCH_PERMUTATIONS, dtype=np.uint64, endpoint=True)
    mul = rng.integers(0, 2**63 - 1, size=SKETCH_PERMUTATIONS, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    numbers: dict[str, int] = {}
    flat: list[int] = []
    lengths = np.zeros(len(sets), dtype=np.int64)
    for i, s in enumerate(sets):
        lengths[i] = len(s)
        for w in s:
            n = numbers.get(w)
            if n is None:
                n = numbers[w] = word_hash(w)
            flat.append(n)
    words = np.array(flat, dtype=np.uint64)
    out = np.full((len(sets), SKETCH_PERMUTATIONS), _EMPTY, dtype=np.uint64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(sets) else lengths
    nonempty = np.flatnonzero(lengths)
    # Sets in runs of about _CHUNK_WORDS words: min over each set's rows of (word ^ xor) * mul.
    i = 0
    while i < len(nonempty):
        j = i
        total = 0
        while j < len(nonempty) and (j == i or total + lengths[nonempty[j]] <= _CHUNK_WORDS):
            total += int(lengths[nonempty[j]])
            j += 1
        run = nonempty[i:j]
        lo = int(starts[run[0]])
        hi = int(starts[run[-1]] + lengths[run[-1]])
        with np.errstate(over="ignore"):
            hashed = (words[lo:hi, None] ^ xor[None, :]) * mul[None, :]
        out[run] = np.minimum.reduceat(hashed, starts[run] - lo, axis=0)
        i = j
    return out
