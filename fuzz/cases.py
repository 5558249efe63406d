"""Structure-aware fuzz cases for every API and version the broker serves.

A case starts from a *valid* request: a random entity of the request's kio schema, filled
field by field from a seeded ``random.Random`` (record fields sometimes hold real v2 batches),
encoded by kio. It is then mutated where it hurts a decoder most: the length prefixes that
:func:`weir.protocol.guard.check` reports (set huge, negative, off by one, zero), truncation
at those field boundaries, random bytes, a random body, the wrong header version. Everything
is a pure function of the seed, so a failing case can be replayed and kept in the corpus.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from weir.protocol import codec, guard
from weir.records.builder import build_batch
from weir.server.handlers import REGISTRY

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "uint8": (0, 255), "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
    "uint64": (0, (1 << 64) - 1),
}
_ERROR_CODES = list(ErrorCode)
_TOPICS = ("fuzz", "__consumer_offsets", "", "a" * 249, "t.x_y-z")


@dataclass(frozen=True, slots=True)
class Target:
    api_key: int
    version: int
    name: str
    request_cls: type
    response_cls: type


def targets() -> list[Target]:
    """Every (API, version) in the broker's registry: what ApiVersions advertises."""
    out = []
    for key, handler in sorted(REGISTRY.items()):
        for version in range(handler.min_version, handler.max_version + 1):
            req, resp = handler.schemas(version)
            out.append(Target(key, version, handler.name, req, resp))
    return out


def _small_int(rng: random.Random, kafka_type: str) -> int:
    low, high = _INT_RANGES[kafka_type]
    pick = rng.random()
    if pick < 0.5:
        return max(low, min(high, rng.randint(-2, 8)))
    if pick < 0.7:
        return rng.choice((low, high, 0, -1))
    return rng.randint(low, high)


def _value(rng: random.Random, kafka_type: str, optional: bool, depth: int):
    if optional and rng.random() < 0.15:
        return None
    match kafka_type:
        case "bool":
            return rng.random() < 0.5
        case "string":
            return rng.choice(_TOPICS) if rng.random() < 0.6 else _text(rng)
        case "bytes":
            return rng.randbytes(rng.randint(0, 24))
        case "records":
            if rng.random() < 0.6:
                return build_batch([rng.randbytes(rng.randint(0, 16))
                                    for _ in range(rng.randint(1, 3))])
            return rng.randbytes(rng.randint(0, 80))
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128)) if rng.random() < 0.5 else uuid.UUID(int=0)
        case "error_code":
            return rng.choice(_ERROR_CODES)
        case "float64":
            return rng.uniform(-1e6, 1e6)
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(milliseconds=rng.choice((0, 1, 10, 500, 5000)))
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(rng.randint(0, 2_000_000_000),
                                                   tz=datetime.UTC)
        case _:
            return _small_int(rng, kafka_type)


def _text(rng: random.Random) -> str:
    return "".join(rng.choice("abcxyz-._é0") for _ in range(rng.randint(0, 12)))


def random_entity(cls: type, rng: random.Random, depth: int = 0,
                  fixed: dict[str, object] | None = None):
    """A valid instance of the kio schema class ``cls``, drawn from ``rng``; top-level
    fields named in ``fixed`` take the value given there."""
    args = dict(fixed or {})
    for f in dataclasses.fields(cls):
        if f.name in args:
            continue
        kind = classify_field(f)
        optional = is_optional(f) and get_field_tag(f) is None
        if kind.is_array:
            count = 0 if depth > 3 else rng.choice((0, 1, 1, 2, 3))
            if optional and rng.random() < 0.1:
                args[f.name] = None
                continue
            if isinstance(kind, EntityTupleField):
                args[f.name] = tuple(random_entity(kind.type_, rng, depth + 1)
                                     for _ in range(count))
            else:
                args[f.name] = tuple(_value(rng, f.metadata["kafka_type"], False, depth)
                                     for _ in range(count))
        elif isinstance(kind, EntityField):
            args[f.name] = (None if optional and rng.random() < 0.2
                            else random_entity(kind.type_, rng, depth + 1))
        else:
            args[f.name] = _value(rng, f.metadata["kafka_type"], optional, depth)
    return cls(**args)


def frame(api_key: int, version: int, correlation_id: int, body: bytes,
          flexible_header: bool, client_id: str = "fuzz") -> bytes:
    """A size-prefixed request frame."""
    header = codec.encode_request_header(api_key, version, correlation_id, client_id,
                                         flexible_header)
    return struct.pack(">i", len(header) + len(body)) + header + body


def length_positions(cls: type, body: bytes) -> list[tuple[int, str]]:
    seen: list[tuple[int, str]] = []
    guard.check(cls, body, 0, lambda pos, enc: seen.append((pos, enc)))
    return seen


def _encoded_len(body: bytes, pos: int, encoding: str) -> int:
    if encoding == "int16":
        return 2
    if encoding in ("int32",):
        return 4
    if encoding == "marker":
        return 1
    end = pos
    while end < len(body) and body[end] & 0x80:
        end += 1
    return end + 1 - pos


def _encode(value: int, encoding: str) -> bytes:
    if encoding == "int16":
        return struct.pack(">h", max(-(1 << 15), min((1 << 15) - 1, value)))
    if encoding == "int32":
        return struct.pack(">i", max(-(1 << 31), min((1 << 31) - 1, value)))
    if encoding == "marker":
        return struct.pack(">b", max(-128, min(127, value)))
    return codec.encode_uvarint(max(0, value))


def _current(body: bytes, pos: int, encoding: str) -> int:
    if encoding == "int16":
        return struct.unpack_from(">h", body, pos)[0]
    if encoding == "int32":
        return struct.unpack_from(">i", body, pos)[0]
    if encoding == "marker":
        return struct.unpack_from(">b", body, pos)[0]
    return guard.read_uvarint(memoryview(body), pos, len(body))[0]


MUTATIONS = ("length-huge", "length-negative", "length-off-by-one", "length-zero",
             "truncate-at-field", "truncate-anywhere", "flip-bytes", "random-body",
             "wrong-header", "valid")


def mutate(cls: type, body: bytes, rng: random.Random, kind: str) -> tuple[bytes, bool]:
    """(mutated body, whether the header's flexibility is flipped) for mutation ``kind``."""
    positions = length_positions(cls, body) if kind.startswith(("length", "truncate-at")) else []
    if kind.startswith("length") and positions:
        pos, enc = rng.choice(positions)
        size = _encoded_len(body, pos, enc)
        old = _current(body, pos, enc)
        match kind:
            case "length-huge":
                new = rng.choice(((1 << 31) - 1, 1 << 30, (1 << 34), (1 << 15) - 1, 1 << 20))
            case "length-negative":
                new = rng.choice((-2, -100, -(1 << 31), -(1 << 15)))
            case "length-off-by-one":
                new = old + rng.choice((1, -1))
            case _:
                new = 0
        return body[:pos] + _encode(new, enc) + body[pos + size:], False
    if kind == "truncate-at-field" and positions:
        return body[:rng.choice(positions)[0] + rng.choice((0, 1))], False
    if kind in ("truncate-anywhere", "truncate-at-field", "length-huge", "length-negative",
                "length-off-by-one", "length-zero"):
        return body[:rng.randint(0, max(len(body) - 1, 0))], False
    if kind == "flip-bytes" and body:
        out = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.getrandbits(8)))
        return bytes(out), False
    if kind == "random-body":
        return rng.randbytes(rng.randint(0, 256)), False
    if kind == "wrong-header":
        return body, True
    return body, False


@dataclass(frozen=True, slots=True)
class Case:
    target: Target
    mutation: str
    seed: int
    body: bytes
    flip_header: bool

    def frame(self, correlation_id: int) -> bytes:
        flexible = bool(self.target.request_cls.__flexible__) != self.flip_header
        return frame(self.target.api_key, self.target.version, correlation_id, self.body,
                     flexible)


# Like Kafka without CLUSTER_ACTION ACLs (KIP-380 only fences *older* epochs), a broker obeys
# any well-formed controller request that carries a newer controller epoch, and the
# controller honours a ControlledShutdown naming a live broker. A fuzzer that sent those would
# take the cluster over rather than test the decoder, so these fields are pinned to values
# that are fenced (controller epoch 0 is older than any elected controller's) or unknown.
CONTROL_FIELDS: dict[int, dict[str, object]] = {
    4: {"controller_epoch": 0}, 5: {"controller_epoch": 0}, 6: {"controller_epoch": 0},
    7: {"broker_id": 424242},
}


def make_case(target: Target, mutation: str, seed: int, schema: type | None = None) -> Case:
    """A case for ``target``'s request, or for ``schema`` (its response, say) if given."""
    cls = schema or target.request_cls
    rng = random.Random(f"{cls.__name__}/{target.api_key}/{target.version}/{mutation}/{seed}")
    request = cls is target.request_cls
    entity = random_entity(cls, rng, fixed=CONTROL_FIELDS.get(target.api_key) if request
                           else None)
    valid = codec.encode_body(entity)
    body, flip = mutate(cls, valid, rng, mutation)
    case = Case(target, mutation, seed, body, flip)
    if request and target.api_key in CONTROL_FIELDS and _unpins(case):
        # The mutation changed a pinned field (flipped bytes, or a header of the wrong
        # version that shifts the body by a byte): send a truncation instead.
        case = Case(target, mutation, seed, valid[:rng.randint(0, len(valid) - 1)], False)
    return case


def _unpins(case: Case) -> bool:
    """Whether the broker, decoding this case's frame as it will, sees a pinned field with
    another value."""
    frame = case.frame(1)[4:]
    cls = case.target.request_cls
    try:
        header = codec.parse_request_header(frame, bool(cls.__flexible__))
        entity = codec.decode_body(cls, frame, header.size)
    except codec.MalformedRequest:
        return False
    return any(getattr(entity, k) != v for k, v in CONTROL_FIELDS[case.target.api_key].items())


def cases(seed: int, per_target: int, skip_api_keys: frozenset[int] = frozenset()
          ) -> Iterator[Case]:
    """``per_target`` cases for every API and version, mutations in rotation."""
    for target in targets():
        if target.api_key in skip_api_keys:
            continue
        for i in range(per_target):
            yield make_case(target, MUTATIONS[(seed + i) % len(MUTATIONS)], seed * 100_003 + i)
