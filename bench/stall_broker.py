"""Run a broker with an event-loop stall watchdog (used by ``bench/fetch_stalls.py``).

A task turns every 5 ms; a daemon thread checks every 3 ms and, when the loop has not
turned for ``WEIR_STALL_MS`` (default 25) milliseconds, appends one record to the file
``WEIR_STALL_LOG`` once the loop turns again: the wall time it was seen, how long the loop
stood still, and the main thread's innermost frames when it was seen (what the loop is
blocked in; a blocking system call shows as its Python caller).

    python bench/stall_broker.py broker start --config FILE
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import threading
import time
import traceback


def main() -> None:
    out = open(os.environ["WEIR_STALL_LOG"], "a", buffering=1)  # noqa: SIM115 - for the life of the broker
    limit = float(os.environ.get("WEIR_STALL_MS", "25")) / 1000
    beat = [time.perf_counter()]
    main_id = threading.main_thread().ident

    def watchdog() -> None:
        stalled: dict | None = None  # the stall seen, written once the loop turns again
        since = 0.0
        while True:
            time.sleep(0.003)
            turned = beat[0]
            now = time.perf_counter()
            if stalled is not None and turned != since:
                stalled["ms"] = round((turned - since) * 1000 - 5, 1)  # less the 5 ms sleep
                out.write(json.dumps(stalled) + "\n")
                stalled = None
            if stalled is None and now - turned > limit + 0.005:
                frame = sys._current_frames().get(main_id)
                frames = traceback.extract_stack(frame)[-6:] if frame is not None else []
                since = turned
                stalled = {"at": time.time(), "frames": [
                    f"{f.filename.rsplit('/weir/', 1)[-1]}:{f.lineno} {f.name}"
                    for f in frames]}

    async def heartbeat() -> None:
        while True:
            beat[0] = time.perf_counter()
            await asyncio.sleep(0.005)

    plain_run = asyncio.run

    def run(coro, **kwargs):
        async def with_heartbeat():
            task = asyncio.ensure_future(heartbeat())
            try:
                return await coro
            finally:
                task.cancel()
        return plain_run(with_heartbeat(), **kwargs)

    asyncio.run = run
    threading.Thread(target=watchdog, name="stall-watchdog", daemon=True).start()
    sys.argv = ["weir", *sys.argv[1:]]
    runpy.run_module("weir", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
