"""BrokerCore: the broker's parts built whole from an injected ZooKeeper client, clock and
transport; requests reach its handlers as encoded frames through its Dispatcher."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from weir.common import TopicPartition
from weir.config import BrokerConfig
from weir.protocol.client import FrameConnection
from weir.protocol.errors import ErrorCode
from weir.replication.alter_partition import IsrProposal
from weir.server.broker_core import BrokerCore
from weir.server.metadata_cache import BrokerMeta


class _NoZooKeeper:
    """Building the parts must not talk to ZooKeeper (only starting them does)."""

    inter_broker_listener = "PLAINTEXT"

    def __getattr__(self, name: str):
        raise AssertionError(f"ZooKeeper used while building the broker: {name}")


def _core(broker_id: int, root, connect, clock) -> BrokerCore:
    config = BrokerConfig({"broker.id": str(broker_id), "zookeeper.connect": "127.0.0.1:1",
                           "log.dirs": str(root / f"b{broker_id}")})
    return BrokerCore(config, _NoZooKeeper(), now_ms=clock, connect=connect)


def test_the_core_is_built_whole_and_serves_frames_from_an_injected_transport(tmp_path):
    async def scenario() -> None:
        cores: dict[int, BrokerCore] = {}
        reached: list[tuple[str, int]] = []

        def connect(host: str, port: int) -> FrameConnection:
            reached.append((host, port))

            async def open_call():
                target = cores[port]
                return lambda frame: target.serve_frame(frame, f"broker-{port}")
            return FrameConnection(open_call, client_id="test")

        def clock() -> int:
            return 42

        a, b = (_core(i, tmp_path, connect, clock) for i in (1, 2))
        cores.update({1: a, 2: b})
        rm = a.replica_manager
        # Nothing set after construction: the injected clock and transport are the parts'.
        assert rm.clock is clock and rm.fetchers.clock is clock
        assert rm.alter_partition is not None and rm.alter_partition.connect is connect
        assert a.services.replica_manager is rm and a.dispatcher.services is a.services
        assert not rm.broker_alive(2)  # from the metadata cache: broker 2 not known yet
        a.metadata.update(2, 1, [BrokerMeta(2, "b", 2, None, (("PLAINTEXT", "b", 2),))], [])
        assert rm.broker_alive(2) and a.controller_endpoint() == (2, "b", 2)
        # An ISR proposal goes to broker 2 as an encoded AlterPartition frame, through its
        # Dispatcher and AlterPartition handler; broker 2 is no controller and says so.
        proposal = IsrProposal(TopicPartition("t", 0), uuid.uuid4(), 3, 5, frozenset({1}))
        with pytest.raises(ConnectionError, match="(?i)not_controller"):
            await rm.alter_partition._send([proposal])
        assert reached == [("b", 2)]
    asyncio.run(scenario())


def test_the_transaction_plane_reaches_brokers_over_the_injected_transport(tmp_path):
    """The transaction coordinator's markers (Kafka's TransactionMarkerChannelManager) and
    the KIP-890 verifier (AddPartitionsToTxnManager) use the core's ``connect`` and
    request.timeout.ms; ``__transaction_state`` is created as the constructor was told."""
    async def scenario() -> None:
        cores: dict[int, BrokerCore] = {}
        client_ids: list[str] = []

        def connect(host: str, port: int, *, client_id: str = "test",
                    security: object = None) -> FrameConnection:
            client_ids.append(client_id)

            async def open_call():
                target = cores[port]
                return lambda frame: target.serve_frame(frame, f"broker-{port}")
            return FrameConnection(open_call, client_id=client_id)

        async def create_topic() -> None:
            return None

        config = {"zookeeper.connect": "127.0.0.1:1", "request.timeout.ms": "700"}
        a, b = (BrokerCore(BrokerConfig({**config, "broker.id": str(i),
                                         "log.dirs": str(tmp_path / f"b{i}")}),
                           _NoZooKeeper(), now_ms=lambda: 42, connect=connect,
                           create_transaction_state_topic=create_topic)
                for i in (1, 2))
        cores.update({1: a, 2: b})
        assert a.txn_coordinator.sender is a.txn_markers
        assert a.txn_coordinator._create_topic is create_topic
        assert a.txn_markers.request_timeout_s == a.txn_verifier.request_timeout_s == 0.7
        a.metadata.update(2, 1, [BrokerMeta(2, "b", 2, None, (("PLAINTEXT", "b", 2),))], [])
        # A COMMIT marker for a partition broker 2 does not host: an encoded WriteTxnMarkers
        # frame through broker 2's Dispatcher and handler, answered per partition.
        tp = TopicPartition("t", 0)
        errors = await a.txn_markers.send(2, 1000, 0, True, 0, [tp])
        assert errors == {tp: ErrorCode.unknown_topic_or_partition}  # broker 2 answered
        assert client_ids == ["broker-1-txn-markers"]
    asyncio.run(scenario())


class _FlakyZooKeeper(_NoZooKeeper):
    """A session that expires under the first log-dir-event write, then reconnects."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.written: list[int] = []

    def propagate_log_dir_event(self, broker_id: int) -> str:
        if self.failures:
            raise self.failures.pop(0)
        self.written.append(broker_id)
        return f"/log_dir_event_notification/log_dir_event_{len(self.written):010d}"

    def __getattr__(self, name: str):
        raise AssertionError(f"ZooKeeper used while building the broker: {name}")


def test_a_log_dir_event_is_retried_across_a_lost_session(tmp_path):
    """Kafka's KafkaZkClient.propagateLogDirEvent retries until connected
    (retryRequestUntilConnected): a session expiring under the write must not lose the
    notification, or the controller never moves the failed dir's leaders."""
    from kazoo.exceptions import ConnectionLoss, SessionExpiredError

    async def scenario() -> None:
        zk = _FlakyZooKeeper([SessionExpiredError(), ConnectionLoss()])
        config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "127.0.0.1:1",
                               "log.dirs": str(tmp_path / "b1")})

        async def inline(fn, *args):
            return fn(*args)
        core = BrokerCore(config, zk, run_blocking=inline)
        await asyncio.wait_for(core._propagate_log_dir_event(), 5)
        assert zk.written == [1]
    asyncio.run(scenario())
