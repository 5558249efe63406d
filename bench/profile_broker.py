"""Run a broker under cProfile and write the profile when it exits.

``python -m cProfile -o FILE -m weir ...`` writes nothing for a broker: after its clean stop
the broker leaves with ``os._exit`` (no interpreter teardown of a large heap), which skips
cProfile's own dump.  This wrapper writes the profile first.

    python bench/profile_broker.py OUT.prof broker start --config FILE
"""

from __future__ import annotations

import cProfile
import os
import runpy
import sys


def main() -> None:
    out = sys.argv[1]
    profiler = cProfile.Profile()
    exit_now = os._exit

    def dump_and_exit(code: int) -> None:
        profiler.disable()
        profiler.dump_stats(out)
        exit_now(code)

    os._exit = dump_and_exit  # type: ignore[assignment]
    sys.argv = ["weir", *sys.argv[2:]]
    profiler.enable()
    try:
        runpy.run_module("weir", run_name="__main__", alter_sys=True)
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
