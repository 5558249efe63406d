"""The broker's start-up line measures from the process's start (``/proc/self/stat``)."""

from __future__ import annotations

import subprocess
import sys


def test_process_age_counts_the_time_before_the_import() -> None:
    code = ("import time; time.sleep(2.0); "
            "from weir.server.broker import _process_age_s; print(_process_age_s())")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=120)
    age = float(done.stdout.strip().splitlines()[-1])
    assert 2.0 <= age < 120  # the sleep came first: wall time (the imports are ~1 s of CPU)
