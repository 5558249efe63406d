"""Leader side of KIP-497: ISR changes go to the controller as AlterPartition requests.

Partition leaders propose a new ISR (expansion when a follower catches up, shrink when one
falls behind ``replica.lag.time.max.ms``); proposals are batched into one AlterPartition v3
request to the active controller, which writes ZooKeeper conditionally and answers with the
committed leader, ISR and partition epoch.  Until the answer the leader keeps using the
*maximal* ISR for the high watermark (see :mod:`weir.replication.partition`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import AlterPartitionRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IsrProposal:
    tp: TopicPartition
    topic_id: uuid.UUID
    leader_epoch: int
    partition_epoch: int
    isr: frozenset[int]


@dataclass(frozen=True, slots=True)
class IsrResult:
    tp: TopicPartition
    error: ErrorCode
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


ConnectionFactory = Callable[[str, int], Any]
"""(host, port) -> a connection with ``connect(timeout_s)``, ``connected``,
``request(request, timeout_s)`` and ``close()`` (:class:`BrokerConnection` over TCP; the
simulation's connection delivers encoded frames to the controller's request handlers)."""


class AlterPartitionManager:
    """Sends queued ISR proposals to the controller; hands the answers to ``on_result``
    (Kafka's ``DefaultAlterPartitionManager``)."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 controller: Callable[[], tuple[int, str, int] | None],
                 on_result: Callable[[IsrResult], None], backoff_ms: int = 200,
                 timeout_ms: int = 30000, security: Any = None,
                 connect: ConnectionFactory | None = None) -> None:
        """``connect``: how the controller is reached (default: a :class:`BrokerConnection`
        on the inter-broker listener with ``security``, its TLS/SASL)."""
        self.broker_id = broker_id
        self.connect: ConnectionFactory = connect or (
            lambda host, port: BrokerConnection(host, port, client_id=f"broker-{broker_id}",
                                                security=security))
        self.broker_epoch = broker_epoch
        self.controller = controller  # (id, host, port) of the active controller, or None
        self.on_result = on_result
        self.backoff_ms = backoff_ms
        self.timeout_ms = timeout_ms
        self._queue: dict[TopicPartition, IsrProposal] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._conn: Any = None
        self._conn_target: tuple[int, str, int] | None = None

    def submit(self, proposal: IsrProposal) -> None:
        self._queue[proposal.tp] = proposal
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="alter-partition")

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self._drop()

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch, self._queue = self._queue, {}
            try:
                results = await self._send(list(batch.values()))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: requeue and back off
                log.info("AlterPartition to the controller failed (%s); retrying", exc)
                await self._drop()
                for tp, proposal in batch.items():
                    self._queue.setdefault(tp, proposal)
                await asyncio.sleep(self.backoff_ms / 1000)
                continue
            for result in results:
                self.on_result(result)

    async def _send(self, proposals: list[IsrProposal]) -> list[IsrResult]:
        target = self.controller()
        if target is None:
            raise ConnectionError("no controller known")
        if self._conn is None or not self._conn.connected or self._conn_target != target:
            await self._drop()
            conn = self.connect(target[1], target[2])
            await conn.connect(self.timeout_ms / 1000)
            self._conn, self._conn_target = conn, target
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        names: dict[uuid.UUID, str] = {}
        for p in proposals:
            names[p.topic_id] = p.tp.topic
            by_topic.setdefault(p.topic_id, []).append({
                "partition_index": p.tp.partition,
                "leader_epoch": p.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1}
                                        for b in sorted(p.isr)],
                "leader_recovery_state": 0,
                "partition_epoch": p.partition_epoch,
            })
        request = codec.build(AlterPartitionRequest, broker_id=self.broker_id,
                              broker_epoch=self.broker_epoch(),
                              topics=[{"topic_id": t, "partitions": parts}
                                      for t, parts in by_topic.items()])
        response = await self._conn.request(request, self.timeout_ms / 1000)
        if response.error_code != ErrorCode.none:
            raise ConnectionError(f"controller answered {response.error_code.name}")
        results = []
        answered = set()
        for topic in response.topics:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, int(part.partition_index))
                answered.add(tp)
                results.append(IsrResult(tp, part.error_code, int(part.leader_epoch),
                                         tuple(int(b) for b in part.isr),
                                         int(part.partition_epoch)))
        for p in proposals:
            if p.tp not in answered:
                results.append(IsrResult(p.tp, ErrorCode.unknown_server_error))
        return results

    async def _drop(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
