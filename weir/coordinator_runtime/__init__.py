"""The shell shared by the group and transaction coordinators (Kafka's CoordinatorRuntime and
the loading half of GroupMetadataManager / TransactionStateManager); see README.md."""

from weir.coordinator_runtime.collaborators import (
    SYSTEM_CLOCK,
    Clock,
    CoordinatorLog,
    MetadataView,
    PartitionLogReader,
    ReplicaManagerLog,
    SystemClock,
    read_batches,
)
from weir.coordinator_runtime.shell import CoordinatorPartition, CoordinatorShell, Loading

__all__ = [
    "SYSTEM_CLOCK", "Clock", "CoordinatorLog", "CoordinatorPartition", "CoordinatorShell",
    "Loading", "MetadataView", "PartitionLogReader", "ReplicaManagerLog", "SystemClock",
    "read_batches",
]
