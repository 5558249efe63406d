"""Producer ids for idempotent producers, claimed in blocks of 1000 through ZooKeeper's
``/latest_producer_id_block`` (as Kafka's ZooKeeper mode does), so ids are unique across the
cluster and across restarts."""

from __future__ import annotations

import asyncio


class ProducerIdManager:
    def __init__(self, zk, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._next = 0
        self._end = -1
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                block = await asyncio.to_thread(self.zk.allocate_producer_id_block,
                                                self.broker_id)
                self._next, self._end = block.block_start, block.block_end
            pid = self._next
            self._next += 1
            return pid
