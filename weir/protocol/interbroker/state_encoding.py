"""Hand-written encoders for the bulk of LeaderAndIsr v7 and UpdateMetadata v8 requests.

A controller event at 10,000 partitions sends each survivor a LeaderAndIsr and an
UpdateMetadata naming thousands of partition states; kio's generic entity writer spends
~6 µs of CPU on each one (its per-field writers, type checks and varint loop): 58 ms for
one broker failure's first batch at 3,333 partitions in isolation, and 0.3–0.4 s of the
controller broker's loop with the rest of the cluster on the same cores.
Kafka's generated ``LeaderAndIsrRequestData.write`` / ``UpdateMetadataRequestData.write``
are straight-line code per field; so is this, for the part that scales (``topic_states``).

:func:`encode_request` encodes the request with kio with its ``topic_states`` left empty
(every other field, tagged ones included, stays kio's), then writes the topic states by
hand where the empty array's one byte was.  The result is byte for byte kio's encoding of
the whole request (checked by the unit tests); a request of any other class or version, or
one whose empty-array byte is not where the fixed-width prefix puts it, is left to kio.

``memo`` (optional) keeps each partition state's bytes by identity for the life of one
batch: the controller hands the same state object to every replica's LeaderAndIsr, so the
second and third recipients reuse the first one's bytes.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from weir.protocol import codec

from .leader_and_isr.v7 import LeaderAndIsrRequest
from .update_metadata.v8 import UpdateMetadataRequest

__all__ = ["encode_request"]

_FOUR_INT32 = struct.Struct(">iiii")
_INT32 = struct.Struct(">i")
_ZERO_UUID = bytes(16)
_TAIL = b"\x00"  # an entity's empty tagged-field section (KIP-482)

# The fixed-width fields before ``topic_states``: LeaderAndIsr v7 ControllerId,
# IsKRaftController, ControllerEpoch, BrokerEpoch, Type; UpdateMetadata v8 the same
# without Type (a tagged field there, written at the end).
_PREFIX_BYTES = {LeaderAndIsrRequest: 4 + 1 + 4 + 8 + 1, UpdateMetadataRequest: 4 + 1 + 4 + 8}
_EMPTY_ARRAY = 1  # a compact array's length byte for zero items (count + 1)

_VARINTS = [codec.encode_uvarint(n) for n in range(256)]


def _uvarint(n: int) -> bytes:
    return _VARINTS[n] if n < 256 else codec.encode_uvarint(n)


def _int32s(values: tuple[int, ...] | list[int]) -> bytes:
    """A compact array of int32."""
    count = len(values)
    return _uvarint(count + 1) + struct.pack(f">{count}i", *values)


def _leader_and_isr_partition(ps: Any) -> bytes:
    # PartitionIndex ControllerEpoch Leader LeaderEpoch, Isr, PartitionEpoch, Replicas,
    # AddingReplicas, RemovingReplicas, IsNew, LeaderRecoveryState, tagged fields
    return b"".join((
        _FOUR_INT32.pack(ps.partition_index, ps.controller_epoch, ps.leader, ps.leader_epoch),
        _int32s(ps.isr), _INT32.pack(ps.partition_epoch), _int32s(ps.replicas),
        _int32s(ps.adding_replicas), _int32s(ps.removing_replicas),
        b"\x01" if ps.is_new else b"\x00",
        struct.pack(">b", ps.leader_recovery_state), _TAIL,
    ))


def _update_metadata_partition(ps: Any) -> bytes:
    # PartitionIndex ControllerEpoch Leader LeaderEpoch, Isr, ZkVersion, Replicas,
    # OfflineReplicas, tagged fields
    return b"".join((
        _FOUR_INT32.pack(ps.partition_index, ps.controller_epoch, ps.leader, ps.leader_epoch),
        _int32s(ps.isr), _INT32.pack(ps.zk_version), _int32s(ps.replicas),
        _int32s(ps.offline_replicas), _TAIL,
    ))


_PARTITION_WRITERS = {LeaderAndIsrRequest: _leader_and_isr_partition,
                      UpdateMetadataRequest: _update_metadata_partition}


def _topic_states(topic_states: tuple[Any, ...], write_partition: Any,
                  memo: dict[int, tuple[Any, bytes]] | None) -> bytes:
    parts = [_uvarint(len(topic_states) + 1)]
    append = parts.append
    for topic in topic_states:
        name = topic.topic_name.encode()
        append(_uvarint(len(name) + 1))
        append(name)
        append(_ZERO_UUID if topic.topic_id is None else topic.topic_id.bytes)
        states = topic.partition_states
        append(_uvarint(len(states) + 1))
        if memo is None:
            parts.extend(map(write_partition, states))
        else:
            for ps in states:
                kept = memo.get(id(ps))
                if kept is None or kept[0] is not ps:
                    kept = memo[id(ps)] = (ps, write_partition(ps))
                append(kept[1])
        append(_TAIL)
    return b"".join(parts)


def encode_request(request: Any, memo: dict[int, tuple[Any, bytes]] | None = None) -> bytes:
    """``request``'s body, as ``codec.encode_body`` writes it."""
    cls = type(request)
    prefix = _PREFIX_BYTES.get(cls)
    if prefix is None or not request.topic_states:
        return codec.encode_body(request)
    shell = codec.encode_body(dataclasses.replace(request, topic_states=()))
    if len(shell) <= prefix or shell[prefix] != _EMPTY_ARRAY:
        return codec.encode_body(request)  # not the layout this relies on
    states = _topic_states(request.topic_states, _PARTITION_WRITERS[cls], memo)
    return b"".join((shell[:prefix], states, shell[prefix + 1:]))
