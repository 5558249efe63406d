"""Send fuzz cases to a live broker, each on its own connection, and classify the outcome.

The broker must either answer (a size-prefixed frame carrying the case's correlation id) or
close that connection; a case that does neither within ``wait_s`` is "pending" when its API
may hold a request (a long-poll Fetch, an acks=all Produce: Kafka holds those too) and a
"hang" otherwise; either way its connection is then closed by us.
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import Iterable

from fuzz.cases import Case

# APIs whose requests Kafka may hold until a time the request itself names: Produce (timeout,
# acks=all), Fetch (max wait), JoinGroup and SyncGroup (the rebalance), CreateTopics,
# DeleteTopics, DeleteRecords, CreatePartitions and ElectLeaders (timeout). A case of any other
# API that is neither answered nor closed is a hang.
MAY_WAIT = frozenset({0, 1, 11, 14, 19, 20, 21, 37, 43})


async def _one(host: str, port: int, case: Case, correlation_id: int, wait_s: float) -> str:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
    except (OSError, TimeoutError):
        return "connect-failed"
    try:
        writer.write(case.frame(correlation_id))
        await writer.drain()
        head = await asyncio.wait_for(reader.readexactly(8), wait_s)
        size, corr = struct.unpack(">ii", head)
        if corr != correlation_id:
            return "wrong-correlation-id"
        await asyncio.wait_for(reader.readexactly(size - 4), wait_s)
        return "answered"
    except (asyncio.IncompleteReadError, ConnectionError):
        return "closed"
    except TimeoutError:
        return "pending"
    finally:
        writer.close()


async def run_cases(host: str, port: int, cases: Iterable[Case], *, concurrency: int = 16,
                    wait_s: float = 2.0) -> tuple[Counter, list[tuple[Case, str]]]:
    """(outcome counts, the cases with a bad outcome)."""
    outcomes: Counter = Counter()
    bad: list[tuple[Case, str]] = []
    sem = asyncio.Semaphore(concurrency)

    async def run(case: Case, corr: int) -> None:
        async with sem:
            outcome = await _one(host, port, case, corr, wait_s)
        if outcome == "pending" and case.target.api_key not in MAY_WAIT:
            outcome = "hang"
        outcomes[outcome] += 1
        if outcome in ("connect-failed", "wrong-correlation-id", "hang"):
            bad.append((case, outcome))

    await asyncio.gather(*(run(case, i + 1) for i, case in enumerate(cases)))
    return outcomes, bad


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
