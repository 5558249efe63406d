"""The shell reads ZooKeeper when it processes a watch, not when the watch fired.

Kafka's KafkaController: the watch handlers only enqueue ``TopicChange`` /
``TopicDeletion`` / ``ZkPartitionReassignment`` and ``processTopicChange`` etc. read the
current children or data when the event is processed.  An event carrying the children seen
when the watch fired is stale by the time it is processed if the failover snapshot (read
after the watches were registered) is newer: a topic created in between was dropped as
"disappeared" and then re-added as new, its partitions stuck in NewPartition (their state
znodes existed already), and AlterPartitionReassignments answered
UNKNOWN_TOPIC_OR_PARTITION for a topic that was taking traffic.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.controller.test_service_zk import RecordingChannels
from tests.unit.controller.test_service_zk import _wait as wait_for
from weir.common import TopicPartition
from weir.controller.service import ControllerService
from weir.controller.states import PartitionState
from weir.coordination.codecs import BrokerInfo
from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer
from weir.protocol.errors import ErrorCode


async def _drained(service: ControllerService) -> None:
    """Wait until the controller's queue is empty and its consumer idle."""
    for _ in range(3):
        await wait_for(lambda: service._queue.empty() and not service.core.awaiting_result,
                    "an idle controller queue")
        await asyncio.sleep(0.3)


def test_topic_created_between_watch_and_snapshot_stays_known(zk_server: ZooKeeperServer
                                                              ) -> None:
    """KafkaController.processTopicChange reads /brokers/topics when it runs."""
    connect = f"{zk_server.connect_string}/controller-fresh-reads"
    admin = ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
    zk = ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
    admin.start()
    zk.start()
    admin.ensure_paths()
    tp = TopicPartition("late", 0)

    async def scenario() -> None:
        for broker_id in (1, 2):
            # Both registrations on one session is enough for the controller's view.
            zk.register_broker(BrokerInfo(id=broker_id, host="127.0.0.1",
                                          port=19190 + broker_id))
        service = ControllerService(1, zk, channel_factory=RecordingChannels)
        read_snapshot = service._read_snapshot

        def snapshot_after_a_creation(epoch: int, version: int) -> Any:
            # The watches are registered; a topic appears before the snapshot is read.
            admin.create_topic("late", {0: [1, 2]}, {})
            return read_snapshot(epoch, version)

        service._read_snapshot = snapshot_after_a_creation  # type: ignore[method-assign]
        await service.start()
        await wait_for(lambda: service.is_active, "the controller")
        await _drained(service)
        ctx = service.core.ctx
        assert tp in ctx.leadership
        assert ctx.partition_state(tp) is PartitionState.ONLINE
        outcome = await service.alter_reassignments({tp: (2, 1)})
        assert outcome[tp][0] == ErrorCode.none, outcome
        await service.stop()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 90))
    finally:
        zk.stop()
        admin.stop()


def test_topic_config_change_notification_reaches_the_controller(zk_server: ZooKeeperServer
                                                                 ) -> None:
    """TopicConfigHandler → KafkaController: a /config/changes notification for a topic
    updates the overrides the controller elects with."""
    connect = f"{zk_server.connect_string}/controller-config-changes"
    admin = ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
    zk = ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
    admin.start()
    zk.start()
    admin.ensure_paths()

    async def scenario() -> None:
        zk.register_broker(BrokerInfo(id=1, host="127.0.0.1", port=19191))
        admin.set_entity_config("brokers", "1", {"x": "1"})  # an older notification
        admin.create_topic("c", {0: [1]}, {})
        service = ControllerService(1, zk, channel_factory=RecordingChannels)
        await service.start()
        await wait_for(lambda: "c" in service.core.ctx.topic_ids, "the topic")
        admin.set_topic_config("c", {"unclean.leader.election.enable": "true"})
        await wait_for(lambda: service.core.ctx.topic_configs.get("c"), "the new overrides")
        assert service.core.ctx.unclean_allowed("c", False)
        admin.set_topic_config("c", {})
        await wait_for(lambda: not service.core.ctx.topic_configs.get("c"), "overrides removed")
        await service.stop()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 90))
    finally:
        zk.stop()
        admin.stop()
