"""Schemas of old client-API versions that Kafka 3.9 still serves and kio lacks.

kio is generated from Kafka 4.x, which removed the versions that KIP-896 deprecated; a
Kafka 3.9 broker still answers them. Each class here is derived from kio's oldest schema of
the same API (same field names and Python types, so the handlers read both alike): fields
the older version lacks are dropped, fields only it has are added where Kafka's message JSON
puts them (``clients/src/main/resources/common/message/*.json``). The results follow kio's
entity conventions, so ``kio.serial`` encodes and decodes them like any kio schema.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from kio.index import load_request_schema, load_response_schema
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.static.primitive import i8, i16, i32, i64


@dataclass(frozen=True)
class Added:
    """A field only the older version has: ``name`` goes right after ``after`` (or first)."""

    after: str | None
    name: str
    type: Any
    kafka_type: str
    default: Any = dataclasses.MISSING


def derive(base: type, version: int, drop: frozenset[str] = frozenset(),
           add: tuple[tuple[str, Added], ...] = (), path: str = "") -> type:
    """``base`` (a kio entity) as of an older ``version``; ``drop`` and ``add`` name fields
    by dotted path from the top-level entity (``"topics.partitions.offset"``)."""
    specs: list[tuple[str, Any, Any]] = []
    extra = [a for p, a in add if p == path]

    def put_added(after: str | None) -> None:
        for a in extra:
            if a.after == after:
                specs.append((a.name, a.type, dataclasses.field(
                    default=a.default, metadata={"kafka_type": a.kafka_type})))

    put_added(None)
    for f in dataclasses.fields(base):
        full = f"{path}{f.name}"
        if full not in drop:
            specs.append((f.name, _field_type(f, version, drop, add, full), _copy_field(f)))
        put_added(f.name)
    namespace = {name: getattr(base, name) for name in
                 ("__type__", "__flexible__", "__api_key__", "__header_schema__")}
    namespace["__version__"] = i16(version)
    cls = dataclasses.make_dataclass(base.__name__, specs, namespace=namespace, frozen=True,
                                     slots=True, kw_only=True)
    cls.__module__ = __name__
    return cls


def _field_type(f: dataclasses.Field, version: int, drop, add, full: str) -> Any:
    kind = classify_field(f)
    if not isinstance(kind, EntityField | EntityTupleField):
        return f.type
    nested = derive(kind.type_, version, drop, add, full + ".")
    if isinstance(kind, EntityTupleField):
        return tuple[nested, ...]
    if get_origin(f.type) is UnionType and NoneType in get_args(f.type):
        return nested | None
    return nested


def _copy_field(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return dataclasses.field(default=f.default, metadata=f.metadata)
    if f.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=f.default_factory, metadata=f.metadata)
    return dataclasses.field(metadata=f.metadata)


def _pair(api_key: int, base_version: int, version: int,
          request: tuple[frozenset[str], tuple[tuple[str, Added], ...]] = (frozenset(), ()),
          response: tuple[frozenset[str], tuple[tuple[str, Added], ...]] = (frozenset(), ())
          ) -> tuple[type, type]:
    req = derive(load_request_schema(api_key, base_version), version, *request)
    resp = derive(load_response_schema(api_key, base_version), version, *response)
    return req, resp


def _schemas() -> dict[int, dict[int, tuple[type, type]]]:
    # ListOffsets v0: MaxNumOffsets in, OldStyleOffsets out (no Timestamp/Offset).
    list_offsets_v0 = _pair(
        2, 1, 0,
        request=(frozenset(), (("topics.partitions.", Added(
            "timestamp", "max_num_offsets", i32, "int32", i32(1))),)),
        response=(frozenset({"topics.partitions.timestamp", "topics.partitions.offset"}),
                  (("topics.partitions.", Added("error_code", "old_style_offsets",
                                                tuple[i64, ...], "int64", ())),)))
    # OffsetForLeaderEpoch v0-1: no CurrentLeaderEpoch, no throttle time; v0 no LeaderEpoch.
    ofle_request = (frozenset({"topics.partitions.current_leader_epoch"}), ())
    ofle = {
        v: _pair(23, 2, v, request=ofle_request, response=(frozenset(
            {"throttle_time"} | ({"topics.partitions.leader_epoch"} if v == 0 else set())),
            ()))
        for v in (0, 1)
    }
    # DescribeConfigs v0: no IncludeSynonyms; IsDefault instead of ConfigSource/Synonyms.
    describe_configs_v0 = _pair(
        32, 1, 0, request=(frozenset({"include_synonyms"}), ()),
        response=(frozenset({"results.configs.config_source", "results.configs.synonyms"}),
                  (("results.configs.", Added("read_only", "is_default", bool, "bool",
                                              False)),)))
    # CreateTopics v0-1: no throttle time; v0 no ValidateOnly and no ErrorMessage.
    create_topics = {
        v: _pair(19, 2, v,
                 request=(frozenset({"validate_only"} if v == 0 else set()), ()),
                 response=(frozenset({"throttle_time"} | (
                     {"topics.error_message"} if v == 0 else set())), ()))
        for v in (0, 1)
    }
    # DeleteTopics v0: no throttle time.
    delete_topics_v0 = _pair(20, 1, 0, response=(frozenset({"throttle_time"}), ()))
    # OffsetCommit v0-1: no RetentionTimeMs; v1 has a CommitTimestamp per partition; v0 has
    # no generation and member (offsets stored in ZooKeeper by Kafka).
    offset_commit = {
        0: _pair(8, 2, 0, request=(frozenset(
            {"generation_id_or_member_epoch", "member_id", "retention_time"}), ())),
        1: _pair(8, 2, 1, request=(frozenset({"retention_time"}), (("topics.partitions.", Added(
            "committed_offset", "commit_timestamp", i64, "int64", i64(-1))),))),
    }
    # OffsetFetch v0: the shape of v1 (Kafka reads v0 offsets from ZooKeeper).
    offset_fetch_v0 = _pair(9, 1, 0)
    # ACLs v0 (KIP-290 added pattern types in v1; a v0 request means LITERAL patterns).
    acls_v0 = {
        29: _pair(29, 1, 0, request=(frozenset({"pattern_type_filter"}), ()),
                  response=(frozenset({"resources.pattern_type"}), ())),
        30: _pair(30, 1, 0, request=(frozenset({"creations.resource_pattern_type"}), ())),
        31: _pair(31, 1, 0, request=(frozenset({"filters.pattern_type_filter"}), ()),
                  response=(frozenset({"filter_results.matching_acls.pattern_type"}), ())),
    }
    # Produce v0-2: no transactional id; v0-1 no log append time, v0 no throttle time.
    produce = {
        v: _pair(0, 3, v, request=(frozenset({"transactional_id"}), ()), response=(frozenset(
            ({"responses.partition_responses.log_append_time"} if v < 2 else set())
            | ({"throttle_time"} if v == 0 else set())), ()))
        for v in (0, 1, 2)
    }
    # Fetch v0-3: no isolation level, last stable offset or aborted transactions; v0-2 no
    # max bytes, v0 no throttle time.
    fetch = {
        v: _pair(1, 4, v, request=(frozenset({"isolation_level"} | (
            {"max_bytes"} if v < 3 else set())), ()), response=(frozenset(
                {"responses.partitions.last_stable_offset",
                 "responses.partitions.aborted_transactions"}
                | ({"throttle_time"} if v == 0 else set())), ()))
        for v in (0, 1, 2, 3)
    }
    return {
        0: produce,
        1: fetch,
        **{key: {0: pair} for key, pair in acls_v0.items()},
        # AlterReplicaLogDirs and DescribeLogDirs v0: the shape of v1.
        34: {0: _pair(34, 1, 0)},
        35: {0: _pair(35, 1, 0)},
        2: {0: list_offsets_v0},
        8: offset_commit,
        9: {0: offset_fetch_v0},
        19: create_topics,
        20: {0: delete_topics_v0},
        23: ofle,
        32: {0: describe_configs_v0},
    }


LEGACY_SCHEMAS: dict[int, dict[int, tuple[type, type]]] = _schemas()
"""api key → version → (request class, response class)."""

__all__ = ["LEGACY_SCHEMAS", "Added", "derive", "i8"]
