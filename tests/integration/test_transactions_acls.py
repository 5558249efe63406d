"""The transaction coordinator's authorization (Kafka's KafkaApis checks) on a real broker
with Kafka's AclAuthorizer: TRANSACTIONAL_ID WRITE/DESCRIBE, topic WRITE for
AddPartitionsToTxn, group READ for AddOffsetsToTxn/TxnOffsetCommit, and ListTransactions
showing only describable ids. Each case is refused without its ACL and served with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.integration.acl_cluster import binding, eventually, start_secure_cluster
from tests.integration.clients import raw_request
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation as Op
from weir.security.acls import ResourceType as RT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "txn-acl-topic"
GROUP = "txn-acl-group"
TXN = "txn-acl-id"  # initialised by the fixture
NEVER = "txn-acl-never"  # never initialised
TXN_AUTH = int(ErrorCode.transactional_id_authorization_failed)
TOPIC_AUTH = int(ErrorCode.topic_authorization_failed)
GROUP_AUTH = int(ErrorCode.group_authorization_failed)
MAPPING = int(ErrorCode.invalid_producer_id_mapping)
CLIENT_HOST = "127.0.0.2"
BROKERS = binding(RT.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, host="127.0.0.1")


def _req(slot, api_key: int, version: int, **fields) -> Any:
    return raw_request(slot.host, slot.port, api_key, version, source_host=CLIENT_HOST,
                       **fields)


def _find(slot, txn_id: str) -> int:
    return int(_req(slot, 10, 4, key_type=1, coordinator_keys=[txn_id])
               .coordinators[0].error_code)


def _init(slot, txn_id: str) -> Any:
    return _req(slot, 22, 4, transactional_id=txn_id, transaction_timeout=timedelta(minutes=1),
                producer_id=-1, producer_epoch=-1)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("weir-txn-acl")
    cluster, admin = start_secure_cluster(
        data_dir, 1, [BROKERS, binding(RT.CLUSTER, "kafka-cluster", Op.CREATE),
                      binding(RT.TRANSACTIONAL_ID, TXN, Op.WRITE)],
        **{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
           "transaction.state.log.num.partitions": "3", "offsets.topic.replication.factor": "1",
           "offsets.topic.num.partitions": "3"})
    try:
        slot = cluster.brokers[0]
        eventually(lambda: int(_req(slot, 19, 4, topics=[{
            "name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": []}], timeout=timedelta(seconds=10)).topics[0].error_code), 0)
        # The first lookup creates __transaction_state (WRITE implies DESCRIBE).
        eventually(lambda: _find(slot, TXN), 0, timeout_s=60)
        eventually(lambda: int(_init(slot, TXN).error_code), 0, timeout_s=60)
        admin.revoke(binding(RT.TRANSACTIONAL_ID, TXN, Op.WRITE))
        eventually(lambda: int(_init(slot, TXN).error_code), TXN_AUTH)
        # And __consumer_offsets, by the group's first lookup.
        group_read = binding(RT.GROUP, GROUP, Op.READ)
        admin.grant(group_read)
        eventually(lambda: int(_req(slot, 10, 4, key_type=0, coordinator_keys=[GROUP])
                               .coordinators[0].error_code), 0, timeout_s=60)
        admin.revoke(group_read)
        yield cluster, admin
    finally:
        admin.close()
        cluster.stop()


def _refused_then_served(admin, call, acl, refused: int, served: int) -> None:
    eventually(call, refused)  # an earlier test's revocation may still be on its way
    admin.grant(acl)
    try:
        eventually(call, served)
    finally:
        admin.revoke(acl)
    eventually(call, refused)


def test_find_coordinator_and_init_need_the_transactional_id(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    _refused_then_served(admin, lambda: _find(slot, NEVER),
                         binding(RT.TRANSACTIONAL_ID, NEVER, Op.DESCRIBE), TXN_AUTH, 0)
    _refused_then_served(admin, lambda: int(_init(slot, TXN).error_code),
                         binding(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), TXN_AUTH, 0)


def test_end_txn_and_describe(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    _refused_then_served(
        admin, lambda: int(_req(slot, 26, 3, transactional_id=NEVER, producer_id=1,
                                producer_epoch=0, committed=True).error_code),
        binding(RT.TRANSACTIONAL_ID, NEVER, Op.WRITE), TXN_AUTH, MAPPING)
    _refused_then_served(
        admin, lambda: int(_req(slot, 65, 0, transactional_ids=[NEVER])
                           .transaction_states[0].error_code),
        binding(RT.TRANSACTIONAL_ID, NEVER, Op.DESCRIBE), TXN_AUTH,
        int(ErrorCode.transactional_id_not_found))


def test_add_partitions_needs_the_id_and_topic_write(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]

    def add() -> int:
        r = _req(slot, 24, 3, v3_and_below_transactional_id=NEVER, v3_and_below_producer_id=1,
                 v3_and_below_producer_epoch=0,
                 v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}])
        return int(r.results_by_topic_v3_and_below[0].results_by_partition[0]
                   .partition_error_code)

    eventually(add, TXN_AUTH)
    txn_write = binding(RT.TRANSACTIONAL_ID, NEVER, Op.WRITE)
    admin.grant(txn_write)
    try:
        eventually(add, TOPIC_AUTH)
        _refused_then_served(admin, add, binding(RT.TOPIC, TOPIC, Op.WRITE), TOPIC_AUTH,
                             MAPPING)
    finally:
        admin.revoke(txn_write)


def test_offsets_in_transactions_need_group_read(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]

    def add_offsets() -> int:
        return int(_req(slot, 25, 3, transactional_id=NEVER, producer_id=1, producer_epoch=0,
                        group_id=GROUP).error_code)

    def txn_commit() -> int:
        r = _req(slot, 28, 3, transactional_id=NEVER, group_id=GROUP, producer_id=1,
                 producer_epoch=0, generation_id=-1, member_id="", group_instance_id=None,
                 topics=[{"name": TOPIC, "partitions": [{
                     "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}])
        return int(r.topics[0].partitions[0].error_code)

    eventually(add_offsets, TXN_AUTH)
    assert txn_commit() == TXN_AUTH
    txn_write = binding(RT.TRANSACTIONAL_ID, NEVER, Op.WRITE)
    admin.grant(txn_write)
    try:
        _refused_then_served(admin, add_offsets, binding(RT.GROUP, GROUP, Op.READ), GROUP_AUTH,
                             MAPPING)
        group_read = binding(RT.GROUP, GROUP, Op.READ)
        admin.grant(group_read)
        try:
            # Then READ on the topic: served, the commit waits for the producer's marker.
            _refused_then_served(admin, txn_commit, binding(RT.TOPIC, TOPIC, Op.READ),
                                 TOPIC_AUTH, 0)
        finally:
            admin.revoke(group_read)
    finally:
        admin.revoke(txn_write)


def test_list_transactions_shows_only_describable_ids(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]

    def listed() -> list[str]:
        r = _req(slot, 66, 1, state_filters=[], producer_id_filters=[], duration_filter=-1)
        assert r.error_code == 0
        return [t.transactional_id for t in r.transaction_states]

    eventually(lambda: TXN in listed(), False)
    acl = binding(RT.TRANSACTIONAL_ID, TXN, Op.DESCRIBE)
    admin.grant(acl)
    try:
        eventually(listed, [TXN])
    finally:
        admin.revoke(acl)
