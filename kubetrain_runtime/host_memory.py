"""glibc's malloc, set for a training loop: memory a step frees is kept for the next step.

Every step allocates and frees the same large host buffers (on CPU: activations, gradients and the
optimizer's temporaries; on GPU nodes only batches and small tensors, so it matters little there). By
default glibc adapts its mmap threshold and gives the top of the heap back to the kernel whenever more
than twice that threshold is free, which a training step's frees exceed: the next step faults every page
back in, zero-filled. On the CPU benchmark model that was 10,000-20,000 page faults and about 4 % of
every step, and more where the trainer's allocations happen to leave the heap's top free than where a
hand-written loop's do.

A fixed mmap threshold at glibc's own ceiling (32 MiB) and no trimming of the heap keep the memory:
the process's resident size stays at its peak step's, which the next step needs again anyway.
Allocations above 32 MiB are still mapped and unmapped each time.
"""

from __future__ import annotations

import ctypes

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc refuses more (half its 64 MiB heap size on 64-bit)
NEVER_TRIM = -1  # mallopt(3): "Setting M_TRIM_THRESHOLD to -1 disables trimming completely"


def is_glibc() -> bool:
    return hasattr(ctypes.CDLL(None), "gnu_get_libc_version")


def keep_freed_memory() -> bool:
    """Set this process's malloc to keep freed memory. Returns False, changing nothing, where the C
    library is not glibc (macOS; musl, whose mallopt ignores these)."""
    if not is_glibc():
        return False
    libc = ctypes.CDLL(None)
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # Both or neither: setting either one turns off glibc's adaptive threshold, and the trim threshold
    # alone would leave the mmap threshold at its 128 KiB default, so that every tensor above that size
    # would be mapped, faulted in and unmapped on every use (15x the page faults, measured).
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, NEVER_TRIM))
