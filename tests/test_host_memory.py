"""The trainer's malloc setting, measured in page faults: a step's freed memory serves the next step."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import run

from kubetrain_runtime.host_memory import is_glibc

# Each measurement runs in a fresh interpreter: its malloc settings are set before the first allocation.
pytestmark = [pytest.mark.skipif(not is_glibc(), reason="not glibc: its malloc is left as it is"),
              pytest.mark.processes]

# A training step's host memory, stripped to what glibc sees: 8 buffers of 16 MiB taken, written and
# freed, six times over, with the page faults of each step counted.
STEPS = """
import ctypes, json, resource, sys
from kubetrain_runtime.host_memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
BLOCK = 16 << 20
faults = []
for _ in range(6):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(BLOCK) for _ in range(8)]
    for block in blocks:
        ctypes.memset(block, 1, BLOCK)
    for block in blocks:
        libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""
PAGES_PER_STEP = 8 * (16 << 20) // 4096


def faults_per_step(mode: str) -> list[int]:
    result = run([sys.executable, "-c", STEPS, mode])
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_after_the_first_step_no_step_faults_its_memory_in_again():
    first, *later = faults = faults_per_step("keep")
    assert first > PAGES_PER_STEP / 2  # the first step maps its memory
    assert max(later) < PAGES_PER_STEP / 100, faults


def test_glibc_defaults_fault_every_step_in_again():
    """What the setting is for, and proof that the test above can fail: by default glibc gives the
    freed top of its heap back to the kernel after every step."""
    faults = faults_per_step("default")
    assert min(faults) > PAGES_PER_STEP / 2, faults
