"""KIP-516 on real broker processes: a broker whose log of a partition holds another topic
id than the controller's (the log of an older topic of the same name) refuses the
partition with INCONSISTENT_TOPIC_ID, keeps the log as it is and stays out of the ISR, as
Kafka's ReplicaManager does; once the operator removes that log the replica is created
again and catches up.  A follower's Fetch names its topic by id (v13), and a leader answers
a topic id other than its log's with INCONSISTENT_TOPIC_ID."""

from __future__ import annotations

import asyncio
import shutil
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.clients import (
    consume_assigned,
    create_topic,
    produce,
    wait_topic_deleted,
)
from tests.integration.replication_checks import partition_isrs, partition_leaders, wait_until
from weir.common import TopicPartition
from weir.coordination.codecs import topic_id_to_str
from weir.ops.cluster import LocalCluster
from weir.protocol.errors import ErrorCode
from weir.records.batch import iter_headers
from weir.replication.leader_endpoint import (
    BrokerEndPoint,
    FetchParams,
    PartitionFetch,
    RemoteLeaderEndPoint,
)
from weir.storage.checkpoints import PARTITION_METADATA_FILE, read_partition_metadata

pytestmark = [pytest.mark.integration]

TOPIC = "ids"


def test_a_replica_of_another_topic_id_is_refused_and_kept(tmp_path):
    cluster = LocalCluster(tmp_path / "data", brokers=2, port_base=0)
    cluster.start(timeout_s=90)
    try:
        boot = cluster.bootstrap
        create_topic(boot, TOPIC, 1, 2, config={"min.insync.replicas": "1"})
        wait_until(lambda: partition_isrs(boot, TOPIC).get(0) == [1, 2], 60, "ISR [1, 2]")
        produce(boot, TOPIC, [b"old-%d" % i for i in range(10)], acks="all")
        leader = partition_leaders(boot, TOPIC)[0]
        follower = 3 - leader
        part_dir = cluster.broker_log_dirs(follower)[0] / f"{TOPIC}-0"
        topic_id = read_partition_metadata(cluster.broker_log_dirs(leader)[0] / f"{TOPIC}-0")
        wait_until(lambda: read_partition_metadata(part_dir) == topic_id, 30,
                   "the follower's partition.metadata")

        cluster.stop_broker(follower)
        # The follower's log now claims to be of another topic named "ids".
        other = topic_id_to_str(uuid.uuid4())
        (part_dir / PARTITION_METADATA_FILE).write_text(f"version: 0\ntopic_id: {other}\n")
        segments = {p.name: p.read_bytes() for p in part_dir.glob("*.log")}
        cluster.start_broker(follower)
        cluster.wait_for_brokers([follower], timeout_s=60)
        refusal = f"LeaderAndIsr for {TOPIC}-0 refused"
        wait_until(lambda: refusal in cluster.log_path(follower).read_text(), 60,
                   "the follower's refusal")
        line = next(x for x in cluster.log_path(follower).read_text().splitlines()
                    if refusal in x)
        assert "ERROR" in line and other in line and topic_id in line, line

        produce(boot, TOPIC, [b"new-%d" % i for i in range(10)], acks="all")
        assert partition_isrs(boot, TOPIC)[0] == [leader]
        # The refused log is left as it was: its records and its topic id.
        assert read_partition_metadata(part_dir) == other
        assert {p.name: p.read_bytes() for p in part_dir.glob("*.log")} == segments

        # What an operator does (as with Kafka): remove the stale log; the replica is
        # created again, fetches from the leader and rejoins the ISR.
        cluster.stop_broker(follower)
        shutil.rmtree(part_dir)
        cluster.start_broker(follower)
        cluster.wait_for_brokers([follower], timeout_s=60)
        wait_until(lambda: partition_isrs(boot, TOPIC).get(0) == [1, 2], 60,
                   "the follower back in the ISR")
        wait_until(lambda: read_partition_metadata(part_dir) == topic_id, 30,
                   "the new replica's partition.metadata")
        got = consume_assigned(boot, TOPIC, [0], 20)
        assert [m.value() for m in got] == ([b"old-%d" % i for i in range(10)]
                                            + [b"new-%d" % i for i in range(10)])
    finally:
        cluster.stop()


def test_a_follower_of_a_deleted_topic_reads_nothing_of_its_successor(tmp_path):
    """KIP-516's case, with the follower's own Fetch (RemoteLeaderEndPoint, as its replica
    fetcher sends it) against a real leader: after a topic is deleted and created again
    under the same name, a fetch naming the old topic id is answered UNKNOWN_TOPIC_ID
    with no records, where a fetch by name (v12) reads the new topic's records; the new
    id reads them too (Fetch v13)."""
    cluster = LocalCluster(tmp_path / "data", brokers=2, port_base=0)
    cluster.start(timeout_s=90)
    try:
        boot = cluster.bootstrap
        tp = TopicPartition(TOPIC, 0)

        def created(values: list[bytes]) -> tuple[int, str]:
            create_topic(boot, TOPIC, 1, 2, config={"min.insync.replicas": "1"})
            wait_until(lambda: partition_isrs(boot, TOPIC).get(0) == [1, 2], 60, "ISR [1, 2]")
            produce(boot, TOPIC, values, acks="all")
            leader = partition_leaders(boot, TOPIC)[0]
            return leader, read_partition_metadata(
                cluster.broker_log_dirs(leader)[0] / f"{TOPIC}-0")

        _old_leader, old_id = created([b"old-%d" % i for i in range(5)])
        admin = AdminClient({"bootstrap.servers": boot})
        admin.delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(60)
        wait_topic_deleted(cluster, TOPIC)  # created again below: not before it is gone
        leader, new_id = created([b"new-%d" % i for i in range(3)])
        assert new_id != old_id
        slot = next(b for b in cluster.brokers if b.id == leader)

        async def fetch(tid: str | None):
            endpoint = RemoteLeaderEndPoint(BrokerEndPoint(leader, slot.host, slot.port),
                                            "test-follower")
            try:
                answer = await endpoint.fetch(
                    FetchParams(replica_id=3 - leader, max_wait_ms=0),
                    {tp: PartitionFetch(fetch_offset=0, current_leader_epoch=-1,
                                        last_fetched_epoch=-1, log_start_offset=0,
                                        partition_max_bytes=1 << 20, topic_id=tid)})
                return answer.partitions[tp], endpoint.session.uses_topic_ids
            finally:
                await endpoint.close()

        def records(part) -> int:
            return sum(h.records_count for h in iter_headers(bytes(part.records)))

        stale, by_id = asyncio.run(fetch(old_id))
        assert by_id and stale.error == ErrorCode.unknown_topic_id and not stale.records
        by_name, by_id = asyncio.run(fetch(None))
        assert not by_id and by_name.error == ErrorCode.none and records(by_name) == 3
        current, by_id = asyncio.run(fetch(new_id))
        assert by_id and current.error == ErrorCode.none and records(current) == 3
    finally:
        cluster.stop()
