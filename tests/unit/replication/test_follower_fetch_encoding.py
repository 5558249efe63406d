"""The follower's hand-encoded Fetch request (v12) is kio's encoding of the same values."""

from __future__ import annotations

import datetime

import pytest

from weir.protocol import codec
from weir.replication.leader_endpoint import (
    FETCH_VERSION,
    FetchParams,
    _fetch_request_type,
    _fetch_schema,
    encode_fetch_request,
)


def _part(i: int) -> dict:
    return {"partition": i, "current_leader_epoch": 7 + i, "fetch_offset": (1 << 40) + i,
            "last_fetched_epoch": -1 if i % 2 else 6, "log_start_offset": i * 1000,
            "partition_max_bytes": 1 << 20}


@pytest.mark.parametrize(("by_topic", "forgotten"), [
    ({}, {}),
    ({"alpha": [_part(0)]}, {}),
    ({"alpha": [_part(0), _part(3)], "béta-" + "x" * 150: [_part(i) for i in range(200)]},
     {"gone": [1, 2, 300], "also-gone": [0]}),
])
def test_hand_encoded_follower_fetch_is_kios(by_topic, forgotten):
    params = FetchParams(replica_id=3, max_wait_ms=500, min_bytes=1, max_bytes=10 << 20)
    kio = codec.encode_body(codec.build(
        _fetch_schema(), replica_id=3, max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1, max_bytes=10 << 20, isolation_level=0, session_id=12345,
        session_epoch=9, rack_id="",
        topics=[{"topic": t, "partitions": parts} for t, parts in by_topic.items()],
        forgotten_topics_data=[{"topic": t, "partitions": parts}
                               for t, parts in forgotten.items()]))
    assert encode_fetch_request(params, 12345, 9, by_topic, forgotten) == kio


def test_request_type_names_fetch_v12():
    cls = type(_fetch_request_type())
    assert (int(cls.__api_key__), int(cls.__version__)) == (1, FETCH_VERSION)
