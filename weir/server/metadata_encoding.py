"""Metadata answers spliced from per-partition encodings kept across UpdateMetadata requests.

A Metadata answer for every topic of a 10,000-partition cluster costs ~0.1 s to build and
encode, and the first one after each UpdateMetadata paid all of it even when the update
changed a third of the partitions (a controlled shutdown or a broker failure) — at the
moment every client asks again for the new leaders.  Kafka's ``MetadataCache`` keeps its
partition states between updates and changes only the updated ones
(``ZkMetadataCache.updateMetadata``); here the same holds for their encodings: each
partition entity's bytes are kept per response version (``MetadataCache.partition_bytes``,
dropped for the partitions an update names or whose brokers came or went), and an answer
is the encoded response with each array's bytes put in place of an empty array.

The splice needs no knowledge of a version's layout: for each entity class the bytes
around an empty array are found once by encoding it with no element and with one
(:func:`_layout`), and checked to differ only there.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from weir.protocol import codec

__all__ = ["encode_with_arrays", "splice"]

_I32 = struct.Struct(">i")


def _length(flexible: bool, n: int) -> bytes:
    return codec.encode_uvarint(n + 1) if flexible else _I32.pack(n)


_LAYOUTS: dict[tuple[type, str], tuple[bool, int]] = {}


def _layout(cls: type, field: str, sample: Any) -> tuple[bool, int]:
    """(flexible, tail): in ``cls``'s encoding with ``field`` empty, the array's length
    ends ``tail`` bytes before the end (the fields after it have fixed widths: Metadata
    has no tagged fields).  Found once per class by encoding an entity with no element and
    with ``sample`` (its default-valued other fields are the same in both)."""
    found = _LAYOUTS.get((cls, field))
    if found is None:
        found = _LAYOUTS[(cls, field)] = _find_layout(cls, field, sample)
    return found


def _find_layout(cls: type, field: str, sample: Any) -> tuple[bool, int]:
    flexible = bool(cls.__flexible__)
    empty = codec.encode_body(codec.build(cls, {field: ()}))
    one = codec.encode_body(codec.build(cls, {field: (sample,)}))
    element = codec.encode_body(sample)
    for tail in range(len(empty) - len(_length(flexible, 0)) + 1):
        cut = len(empty) - tail - len(_length(flexible, 0))
        rebuilt = empty[:cut] + _length(flexible, 1) + element + empty[len(empty) - tail:]
        if rebuilt == one:
            return flexible, tail
    raise ValueError(f"cannot find the {field} array in {cls.__name__}'s encoding")


def splice(entity_bytes: bytes, cls: type, field: str, sample: Any,
           elements: Sequence[bytes]) -> bytes:
    """``entity_bytes`` (an entity of ``cls`` encoded with ``field`` empty) with the
    encoded ``elements`` as that array; ``sample`` is any element (see :func:`_layout`)."""
    flexible, tail = _layout(cls, field, sample)
    end = len(entity_bytes) - tail
    cut = end - len(_length(flexible, 0))
    return b"".join((entity_bytes[:cut], _length(flexible, len(elements)), *elements,
                     entity_bytes[end:]))


def encode_with_arrays(response: Any, topic_cls: type, partition_cls: type,
                       partition_bytes: Sequence[Sequence[bytes]]) -> bytes:
    """A Metadata response body: ``response`` (its topics built with no partitions), each
    topic's partitions given as encoded entities of ``partition_cls``
    (``partition_bytes[i]`` for topic i)."""
    topics = response.topics
    if not topics:
        return codec.encode_body(response)
    part_sample = codec.build(partition_cls, {})
    topic_bytes = [splice(codec.encode_body(t), topic_cls, "partitions", part_sample, parts)
                   for t, parts in zip(topics, partition_bytes, strict=True)]
    shell = codec.encode_body(codec.build(type(response), _fields(response), topics=()))
    return splice(shell, type(response), "topics", codec.build(topic_cls, {}), topic_bytes)


def _fields(entity: Any) -> dict[str, Any]:
    return {name: getattr(entity, name) for name in entity.__dataclass_fields__}
