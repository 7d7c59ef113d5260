"""Process-wide tuning of glibc's malloc, applied once by each entry point (`memoryd`, the
benchmark processes) before any store thread starts.

glibc serves an allocation of 128 KiB or more with its own mmap, and returns it to the system
when freed; but the first time such a block is freed it raises that threshold to the block's
size (up to 32 MiB), and from then on large blocks come from the heaps and arenas. A first
sweep allocates many short-lived large blocks (SQLite's page cache, statement and parameter
buffers, batches of lines) on several threads, and each arena kept what it once held: a
1.16M-message first sweep peaked near 350 MB, most of it freed memory never given back.
Fixing the threshold (at 1 MiB, with the trim threshold at twice that, as the adjustment
pairs them) turns that adjustment off; the same sweep then peaks near 210 MB.

An operator's own MALLOC_MMAP_THRESHOLD_ (glibc's environment tunable) wins. Elsewhere than
glibc (musl, macOS) there is nothing to tune and nothing is done.
"""

from __future__ import annotations

import ctypes
import os

from memoryd.constants import MMAP_THRESHOLD_BYTES

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES  # what the adjustment itself would pair with it


def tune_allocator() -> bool:
    """Fix glibc's mmap and trim thresholds; True if they were set here."""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") or "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(None)  # the C library the interpreter itself runs on
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc: its mallopt numbers mean nothing here
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Both: a large block freed before this call (an import) has already raised the two.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
