"""ApiVersions advertises what a Kafka 3.9 broker in ZooKeeper mode serves.

KAFKA_3_9 is each request's ``validVersions`` in Kafka's
``clients/src/main/resources/common/message/<Name>Request.json`` at tag 3.9.0-rc3 (the
3.9.0 release), for the APIs whose ``listeners`` include ``zkBroker``. Kafka 3.9 still serves
the versions KIP-896 deprecated (removed in 4.0), so a range starts at 0 wherever 3.9's does.
"""

from __future__ import annotations

import pytest

from weir.protocol import codec
from weir.server.handlers import REGISTRY

KAFKA_3_9: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 11),
    1: ("Fetch", 0, 17),
    2: ("ListOffsets", 0, 9),
    3: ("Metadata", 0, 12),
    4: ("LeaderAndIsr", 0, 7),
    5: ("StopReplica", 0, 4),
    6: ("UpdateMetadata", 0, 8),
    7: ("ControlledShutdown", 0, 3),
    8: ("OffsetCommit", 0, 9),
    9: ("OffsetFetch", 0, 9),
    10: ("FindCoordinator", 0, 6),
    11: ("JoinGroup", 0, 9),
    12: ("Heartbeat", 0, 4),
    13: ("LeaveGroup", 0, 5),
    14: ("SyncGroup", 0, 5),
    15: ("DescribeGroups", 0, 5),
    16: ("ListGroups", 0, 5),
    17: ("SaslHandshake", 0, 1),
    18: ("ApiVersions", 0, 4),
    19: ("CreateTopics", 0, 7),
    20: ("DeleteTopics", 0, 6),
    21: ("DeleteRecords", 0, 2),
    22: ("InitProducerId", 0, 5),
    23: ("OffsetForLeaderEpoch", 0, 4),
    24: ("AddPartitionsToTxn", 0, 5),
    25: ("AddOffsetsToTxn", 0, 4),
    26: ("EndTxn", 0, 4),
    27: ("WriteTxnMarkers", 0, 1),
    28: ("TxnOffsetCommit", 0, 4),
    29: ("DescribeAcls", 0, 3),
    30: ("CreateAcls", 0, 3),
    31: ("DeleteAcls", 0, 3),
    32: ("DescribeConfigs", 0, 4),
    33: ("AlterConfigs", 0, 2),
    34: ("AlterReplicaLogDirs", 0, 2),
    35: ("DescribeLogDirs", 0, 4),
    36: ("SaslAuthenticate", 0, 2),
    37: ("CreatePartitions", 0, 3),
    38: ("CreateDelegationToken", 0, 3),
    39: ("RenewDelegationToken", 0, 2),
    40: ("ExpireDelegationToken", 0, 2),
    41: ("DescribeDelegationToken", 0, 3),
    42: ("DeleteGroups", 0, 2),
    43: ("ElectLeaders", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1),
    45: ("AlterPartitionReassignments", 0, 0),
    46: ("ListPartitionReassignments", 0, 0),
    47: ("OffsetDelete", 0, 0),
    48: ("DescribeClientQuotas", 0, 1),
    49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0),
    51: ("AlterUserScramCredentials", 0, 0),
    56: ("AlterPartition", 0, 3),
    57: ("UpdateFeatures", 0, 1),
    58: ("Envelope", 0, 0),
    60: ("DescribeCluster", 0, 1),
    61: ("DescribeProducers", 0, 0),
    65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 1),
    67: ("AllocateProducerIds", 0, 0),
}

# Where Weir serves less than Kafka 3.9, on purpose: the range Weir serves, and why. The
# inter-broker APIs are served at the versions a Kafka 3.9 controller or broker at
# inter.broker.protocol.version 3.4+ sends (ControllerChannelManager, MetadataVersion);
# older ones come only from brokers at an older IBP.
NARROWER: dict[int, tuple[int, int, str]] = {
    4: (7, 7, "inter-broker: only Weir's own controller sends it, at the newest ZK version"),
    5: (4, 4, "inter-broker: only Weir's own controller sends it, at the newest ZK version"),
    6: (8, 8, "inter-broker: only Weir's own controller sends it, at the newest ZK version"),
    7: (3, 3, "inter-broker: only Weir's own brokers send it, at the newest version"),
    56: (2, 3, "inter-broker: only Weir's own brokers send it (v2+: topic ids)"),
    27: (1, 1, ("inter-broker: kio has no v0 schema; a Kafka 3.9 transaction coordinator "
                "sends v1 (flexible) at IBP 2.8+")),
}


def test_every_registered_api_is_a_kafka_3_9_zookeeper_mode_api():
    unknown = sorted(set(REGISTRY) - set(KAFKA_3_9))
    assert not unknown, f"APIs Kafka 3.9 does not serve in ZooKeeper mode: {unknown}"


@pytest.mark.parametrize("api_key", sorted(REGISTRY))
def test_advertised_range_is_kafka_3_9s(api_key):
    handler = REGISTRY[api_key]
    name, low, high = KAFKA_3_9[api_key]
    served = (handler.min_version, handler.max_version)
    if api_key in NARROWER:
        narrow_low, narrow_high, why = NARROWER[api_key]
        assert served == (narrow_low, narrow_high), (
            f"{name}: serves {served}; update NARROWER ({why}) or the handler")
        assert low <= narrow_low <= narrow_high <= high
    else:
        assert served == (low, high), f"{name}: serves {served}, Kafka 3.9 serves {(low, high)}"


@pytest.mark.parametrize("api_key", sorted(REGISTRY))
def test_every_served_version_has_a_schema_that_round_trips(api_key):
    handler = REGISTRY[api_key]
    for version in range(handler.min_version, handler.max_version + 1):
        request_cls, response_cls = handler.schemas(version)
        assert int(request_cls.__version__) == version == int(response_cls.__version__)
        for cls in (request_cls, response_cls):
            value = codec.build(cls)
            assert codec.decode_body(cls, codec.encode_body(value)) == value
