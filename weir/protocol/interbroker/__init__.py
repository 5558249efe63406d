"""Codecs for the ZooKeeper-era inter-broker APIs that kio lacks.

kio is generated from Kafka 4.x, which dropped ZooKeeper mode and with it these APIs.
The classes here follow kio's generated-entity conventions (frozen, slotted, kw-only
dataclasses with ``__api_key__``/``__version__``/``__flexible__`` class variables and
``kafka_type`` field metadata), so ``kio.serial.entity_reader`` and ``entity_writer``
encode and decode them like any kio schema.

One version of each API, the newest that a ZooKeeper-mode broker speaks:

=====  ==================  =======
key    API                 version
=====  ==================  =======
4      LeaderAndIsr        7
5      StopReplica         4
6      UpdateMetadata      8
7      ControlledShutdown  3
56     AlterPartition      3 (kio's own ``kio.schema.alter_partition.v3``, with topic ids;
                           kio also has v2; Weir needs neither v0 nor v1)
=====  ==================  =======
"""

from kio.schema.alter_partition.v2 import AlterPartitionRequest as AlterPartitionRequestV2
from kio.schema.alter_partition.v2 import AlterPartitionResponse as AlterPartitionResponseV2
from kio.schema.alter_partition.v3 import AlterPartitionRequest, AlterPartitionResponse

from .controlled_shutdown.v3 import ControlledShutdownRequest, ControlledShutdownResponse
from .leader_and_isr.v7 import LeaderAndIsrRequest, LeaderAndIsrResponse
from .stop_replica.v4 import StopReplicaRequest, StopReplicaResponse
from .update_metadata.v8 import UpdateMetadataRequest, UpdateMetadataResponse

__all__ = [
    "INTERBROKER_SCHEMAS",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]

INTERBROKER_SCHEMAS: dict[int, dict[int, tuple[type, type]]] = {
    4: {7: (LeaderAndIsrRequest, LeaderAndIsrResponse)},
    5: {4: (StopReplicaRequest, StopReplicaResponse)},
    6: {8: (UpdateMetadataRequest, UpdateMetadataResponse)},
    7: {3: (ControlledShutdownRequest, ControlledShutdownResponse)},
    56: {
        2: (AlterPartitionRequestV2, AlterPartitionResponseV2),
        3: (AlterPartitionRequest, AlterPartitionResponse),
    },
}
"""api key → version → (request class, response class)."""
