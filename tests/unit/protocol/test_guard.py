"""The structural pre-pass that keeps kio's native decoder away from lengths it would
allocate before checking (Kafka's generated ``Readable`` code checks every length against the
remaining bytes first)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.metadata.v10.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_commit.v8.request import OffsetCommitRequest

from fuzz import corpus
from fuzz.cases import cases, random_entity, targets
from weir.protocol import codec, guard

SCHEMAS = [pytest.param(cls, id=f"{t.name}-v{t.version}-{kind}")
           for t in targets() for kind, cls in (("request", t.request_cls),
                                                ("response", t.response_cls))]
HUGE = codec.encode_uvarint(1 << 34)


@pytest.mark.parametrize("cls", SCHEMAS)
def test_walk_ends_exactly_where_kio_encoding_ends(cls):
    """Every schema the broker reads or writes: the walk agrees with kio byte for byte, and
    every strict prefix is rejected."""
    rng = random.Random(cls.__module__)
    for _ in range(6):
        body = codec.encode_body(random_entity(cls, rng))
        assert guard.check(cls, body) == len(body)
        if not body:
            continue  # ApiVersions v0-2, ListGroups v0-2: empty requests
        for cut in sorted({rng.randrange(len(body)) for _ in range(12)} | {len(body) - 1}):
            with pytest.raises(guard.Truncated):
                guard.check(cls, body[:cut])


@settings(max_examples=40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([FetchRequest, MetadataResponse, OffsetCommitRequest]).flatmap(
    lambda cls: st.tuples(st.just(cls), st.from_type(cls))))
def test_walk_agrees_with_kio_on_hypothesis_entities(cls_and_entity):
    """kio ships Hypothesis strategies for its schemas; they reach shapes our generator
    does not (unicode, extreme integers, tagged fields set)."""
    cls, entity = cls_and_entity
    body = codec.encode_body(entity)
    assert guard.check(cls, body) == len(body)


@pytest.mark.parametrize(("cls", "prefix"), [
    (MetadataRequest, b""),
    (FetchRequest, b"\x00" * 25),
])
def test_huge_compact_array_is_rejected_before_kio_allocates_it(cls, prefix):
    body = prefix + HUGE + b"\x00" * 40
    with pytest.raises(codec.MalformedRequest, match="array of 17179869183 items"):
        codec.decode_body(cls, body)


def test_huge_classic_array_and_string_lengths_are_rejected():
    from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4

    with pytest.raises(codec.MalformedRequest, match="array of 2147483647 items"):
        codec.decode_body(MetadataV4, struct.pack(">i", (1 << 31) - 1) + b"\x00" * 8)
    with pytest.raises(codec.MalformedRequest, match="string: 32767 bytes"):
        codec.decode_body(MetadataV4, struct.pack(">ih", 1, 32767) + b"ab")
    with pytest.raises(codec.MalformedRequest, match="array length -5"):
        codec.decode_body(MetadataV4, struct.pack(">i", -5) + b"\x00")


def test_null_array_where_the_schema_has_none_is_rejected():
    """Kafka: "non-nullable field topics was serialized as null"; handlers get tuples."""
    body = codec.encode_body(random_entity(FetchRequest, random.Random(1)))
    nulled = body[:25] + b"\x00" + b"\x00" * 30  # compact length 0 = null
    with pytest.raises(codec.MalformedRequest, match="null array"):
        codec.decode_body(FetchRequest, nulled)


def test_tagged_field_section_is_bounded():
    body = codec.encode_body(random_entity(MetadataRequest, random.Random(2)))
    # Replace the final tagged-field count (0) by a huge count.
    with pytest.raises(codec.MalformedRequest, match="tagged fields"):
        codec.decode_body(MetadataRequest, body[:-1] + HUGE)
    # One tagged field whose size runs past the end.
    with pytest.raises(codec.MalformedRequest, match="tagged field 7"):
        codec.decode_body(MetadataRequest, body[:-1] + b"\x01\x07" + HUGE)


def test_fuzzed_cases_only_ever_raise_malformed_request():
    """The in-process half of the fuzzing kept in the suite: every API and version, every
    mutation kind; kio must never see bytes that could abort the process."""
    outcomes = {"decoded": 0, "rejected": 0}
    for case in cases(seed=11, per_target=20):
        frame = case.frame(1)[4:]
        flexible = bool(case.target.request_cls.__flexible__)
        try:
            header = codec.parse_request_header(frame, flexible)
            codec.decode_body(case.target.request_cls, frame, header.size)
            outcomes["decoded"] += 1
        except codec.MalformedRequest:
            outcomes["rejected"] += 1
    assert outcomes["decoded"] > 500 and outcomes["rejected"] > 1000, outcomes


def test_corpus_entries_decode_or_are_rejected():
    from weir.server.handlers import REGISTRY

    entries = corpus.load()
    assert entries, "the corpus keeps at least the reported crashes"
    for _name, frame in entries:
        body = frame[4:]
        api_key, version, _ = codec.parse_request_header_prefix(body)
        request_cls, _ = REGISTRY[api_key].schemas(version)
        try:
            header = codec.parse_request_header(body, bool(request_cls.__flexible__))
            codec.decode_body(request_cls, body, header.size)
        except codec.MalformedRequest:
            pass
