"""The follower's hand-encoded Fetch request (v12 by topic name, v13 by topic id) is kio's
encoding of the same values."""

from __future__ import annotations

import datetime
import uuid

import pytest

from weir.protocol import codec
from weir.replication.leader_endpoint import (
    FETCH_VERSION,
    FETCH_VERSION_BY_NAME,
    FetchParams,
    _fetch_request_type,
    _fetch_schema,
    encode_fetch_request,
)


def _part(i: int) -> dict:
    return {"partition": i, "current_leader_epoch": 7 + i, "fetch_offset": (1 << 40) + i,
            "last_fetched_epoch": -1 if i % 2 else 6, "log_start_offset": i * 1000,
            "partition_max_bytes": 1 << 20}


SHAPES = [
    ({}, {}),
    ({"alpha": [_part(0)]}, {}),
    ({"alpha": [_part(0), _part(3)], "béta-" + "x" * 150: [_part(i) for i in range(200)]},
     {"gone": [1, 2, 300], "also-gone": [0]}),
]


def _kio(version: int, key: str, by_topic: dict, forgotten: dict) -> bytes:
    return codec.encode_body(codec.build(
        _fetch_schema(version), replica_id=3, max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1, max_bytes=10 << 20, isolation_level=0, session_id=12345,
        session_epoch=9, rack_id="",
        topics=[{key: t, "partitions": parts} for t, parts in by_topic.items()],
        forgotten_topics_data=[{key: t, "partitions": parts}
                               for t, parts in forgotten.items()]))


PARAMS = FetchParams(replica_id=3, max_wait_ms=500, min_bytes=1, max_bytes=10 << 20)


@pytest.mark.parametrize(("by_topic", "forgotten"), SHAPES)
def test_hand_encoded_follower_fetch_v12_is_kios(by_topic, forgotten):
    assert encode_fetch_request(PARAMS, 12345, 9, by_topic, forgotten,
                                FETCH_VERSION_BY_NAME) == _kio(12, "topic", by_topic, forgotten)


@pytest.mark.parametrize(("by_topic", "forgotten"), SHAPES)
def test_hand_encoded_follower_fetch_v13_is_kios(by_topic, forgotten):
    ids = {name: uuid.uuid5(uuid.NAMESPACE_OID, name) for name in [*by_topic, *forgotten]}
    by_id = {ids[t]: parts for t, parts in by_topic.items()}
    forgotten_by_id = {ids[t]: parts for t, parts in forgotten.items()}
    assert encode_fetch_request(PARAMS, 12345, 9, by_id, forgotten_by_id, FETCH_VERSION) \
        == _kio(13, "topic_id", by_id, forgotten_by_id)


@pytest.mark.parametrize("version", [FETCH_VERSION_BY_NAME, FETCH_VERSION])
def test_request_type_names_its_fetch_version(version):
    cls = type(_fetch_request_type(version))
    assert (int(cls.__api_key__), int(cls.__version__)) == (1, version)
