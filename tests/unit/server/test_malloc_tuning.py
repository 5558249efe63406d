"""The broker's C allocator settings keep freed buffers in the heap (malloc_tuning).

Each check runs in a fresh interpreter: the settings last for the process, and the count
of page faults must not include the test runner's own allocations.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

# Eight 1 MiB buffers alive at once and then freed, as a leader holds several produce
# requests while they wait for replication: glibc's adaptive thresholds keep one block of
# the largest size freed, not eight, so every round faults the pages in again.
_ROUNDS = textwrap.dedent("""
    import resource, sys
    from weir.server import malloc_tuning
    applied = malloc_tuning.keep_freed_memory() if sys.argv[1] == "tuned" else None

    def rounds(n):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(n):
            buffers = [bytearray(1 << 20) for _ in range(8)]
            del buffers
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    rounds(3)
    print(applied, rounds(40) / 40)
""")

glibc_only = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt's thresholds are glibc's")


def _faults_per_round(mode: str) -> tuple[str, float]:
    # glibc's defaults: no MALLOC_* tunables from the environment
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True,
                         text=True, timeout=60, check=True, env=env).stdout.split()
    return out[0], float(out[1])


@glibc_only
def test_freed_buffers_are_not_faulted_in_again() -> None:
    applied, tuned = _faults_per_round("tuned")
    assert applied == "True"
    _, default = _faults_per_round("default")
    # 8 MiB is 2,048 pages: the defaults fault most of them in every round.
    assert default > 1000, default
    assert tuned < 50, tuned
