"""The asyncio shell against a real ZooKeeper: election, failover, a topic's requests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar

from weir.common import TopicPartition
from weir.controller.requests import OutboundRequest
from weir.controller.service import ControllerService
from weir.coordination.codecs import BrokerInfo
from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer
from weir.protocol.interbroker import LeaderAndIsrRequest


class RecordingChannels:
    """Stands in for ControllerChannelManager: records what would be sent."""

    sent: ClassVar[list[tuple[int, OutboundRequest]]] = []

    def __init__(self, on_event: Callable[[Any], None], request_timeout_ms: int = 0) -> None:
        self.on_event = on_event
        self.brokers: frozenset[int] = frozenset()

    async def update_brokers(self, brokers: Any) -> None:
        self.brokers = frozenset(brokers)

    def send(self, requests: Any) -> None:
        RecordingChannels.sent.extend((id(self), r) for r in requests)

    async def close(self) -> None:
        pass


async def _wait(predicate: Callable[[], Any], what: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return value


def test_one_active_controller_and_takeover(zk_server: ZooKeeperServer) -> None:
    connect = f"{zk_server.connect_string}/controller-shell-test"
    clients = [ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
               for _ in range(3)]
    admin, zk_a, zk_b = clients
    for client in clients:
        client.start()
    admin.ensure_paths()

    async def scenario() -> None:
        for broker_id, client in ((1, zk_a), (2, zk_b)):
            client.register_broker(BrokerInfo(id=broker_id, host="127.0.0.1",
                                              port=19090 + broker_id))
        a = ControllerService(1, zk_a, channel_factory=RecordingChannels)
        b = ControllerService(2, zk_b, channel_factory=RecordingChannels)
        await a.start()
        await _wait(lambda: a.is_active, "the first controller")
        await b.start()
        epoch = a.core.ctx.controller_epoch
        assert admin.get_controller_id() == 1 and not b.is_active

        admin.create_topic("t", {0: [1, 2]}, {})
        await _wait(lambda: TopicPartition("t", 0) in admin.get_partition_states(
            [TopicPartition("t", 0)]), "the partition state znode")
        lai = await _wait(lambda: [r for _, r in RecordingChannels.sent
                                   if isinstance(r.request, LeaderAndIsrRequest)],
                          "LeaderAndIsr requests")
        assert {r.broker_id for r in lai} == {1, 2}

        zk_a.stop()  # the active controller's session ends
        await _wait(lambda: b.is_active, "the takeover")
        assert b.core.ctx.controller_epoch == epoch + 1
        assert admin.get_controller_id() == 2
        assert sorted(b.core.ctx.live_brokers) == [2]
        await _wait(lambda: admin.get_partition_states([TopicPartition("t", 0)])
                    [TopicPartition("t", 0)].leader == 2, "leader moved to broker 2")
        await _wait(lambda: not a.is_active, "the old controller resigning", timeout_s=15)
        await a.stop()
        await b.stop()
        assert admin.get_controller_id() is None

    try:
        asyncio.run(asyncio.wait_for(scenario(), 90))
    finally:
        for client in (admin, zk_b):
            client.stop()
