"""Kafka request/response framing on top of the kio codec (sans-I/O).

A Kafka frame is a 4-byte big-endian size followed by a header and a body.  Request
headers are parsed here by hand: kio's generated ``RequestHeader`` encodes ``client_id`` as a
compact string in header v2, but Kafka keeps it a classic int16-length string in every
header version (only the tagged-field section is flexible).

Bodies are decoded and encoded by kio's schema classes (and by the inter-broker classes in
:mod:`weir.protocol.interbroker`, written in kio's conventions).  :func:`build` constructs a
version-specific schema object from plain values, dropping fields a version lacks and filling
absent ones with Kafka's zero values, so handlers can describe one response for every
version they serve.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from weir.protocol import guard

_I16_I16_I32 = struct.Struct(">hhi")
_HEADER_V1 = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

API_VERSIONS_KEY = 18


class MalformedRequest(ValueError):
    """The bytes of a request cannot be decoded; the connection is closed."""


@dataclass(slots=True)  # not frozen: one per request, and a frozen init costs 3x
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes taken by the header, tagged fields included


def encode_uvarint(n: int) -> bytes:
    """An unsigned varint (compact lengths and counts in flexible versions)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    """The position after a tagged-field section (KIP-482) at ``pos``."""
    try:
        return guard.walk_tagged_fields(memoryview(buf), pos, len(buf))
    except guard.Truncated as exc:
        raise MalformedRequest(f"tagged fields: {exc}") from exc


def parse_request_header_prefix(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): enough to answer even an unknown API."""
    if len(frame) < 8:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a header")
    return _I16_I16_I32.unpack_from(frame, 0)


def parse_request_header(frame: bytes | memoryview, flexible: bool) -> RequestHeader:
    size = len(frame)
    if size < 10:
        parse_request_header_prefix(frame)  # the error of a frame shorter than a header
        raise MalformedRequest("truncated client id")
    api_key, api_version, correlation_id, n = _HEADER_V1.unpack_from(frame, 0)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > size:
            raise MalformedRequest("truncated client id")
        client_id = str(frame[pos : pos + n], "utf-8", "replace")  # bytes or memoryview
        pos += n
    if flexible:
        if pos < size and frame[pos] == 0:  # no tagged fields: the usual header v2
            pos += 1
        else:
            pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_request_header(api_key: int, api_version: int, correlation_id: int,
                          client_id: str | None, flexible: bool) -> bytes:
    parts = [_I16_I16_I32.pack(api_key, api_version, correlation_id)]
    if client_id is None:
        parts.append(_I16.pack(-1))
    else:
        raw = client_id.encode()
        parts.append(_I16.pack(len(raw)) + raw)
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def decode_body(cls: type, buf: bytes, offset: int = 0) -> Any:
    """Decode one schema entity; any failure is a :class:`MalformedRequest`.

    The bytes are first walked by :func:`weir.protocol.guard.check`, so that kio's native
    reader never sees a length that runs past the buffer (it would allocate it first).
    """
    try:
        guard.check(cls, buf, offset)
    except guard.Truncated as exc:
        raise MalformedRequest(f"cannot decode {cls.__name__}: {exc}") from exc
    try:
        entity, _size = _reader(cls)(buf, offset)
    except Exception as exc:  # the native reader raises several types
        raise MalformedRequest(f"cannot decode {cls.__name__}: {exc}") from exc
    # Bytes after the body are ignored, as Kafka does: librdkafka, for one, leaves the
    # unused reserved bytes of a null compact array behind its Metadata requests.
    return entity


def encode_body(entity: Any) -> bytes:
    out = io.BytesIO()
    _writer(type(entity))(out, entity)
    return out.getvalue()


def response_header_flexible(api_key: int, response_cls: type) -> bool:
    # ApiVersions responses always use header v0 so that clients can parse them
    # before they know which versions the broker speaks.
    return bool(response_cls.__flexible__) and api_key != API_VERSIONS_KEY


def encode_response_frame(correlation_id: int, body: bytes, flexible_header: bool) -> bytes:
    header = _I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    return _I32.pack(len(header) + len(body)) + header + body


# ---------------------------------------------------------------------------
# Building schema objects from plain values


_ZERO_UUID = uuid.UUID(int=0)


def _zero(kafka_type: str, optional: bool) -> Any:
    if optional:
        return None
    match kafka_type:
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "bool":
            return False
        case "uuid":
            return _ZERO_UUID
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(0)
        case "float64":
            return 0.0
        case _:
            return 0


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    nested: type | None  # entity class for nested entities
    array: bool
    default: Any  # dataclasses.MISSING when the schema has none
    zero: Any


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        nested = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        array = kind.is_array
        default = f.default
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        if array:
            zero: Any = ()
        elif nested is not None:
            zero = None
        else:
            zero = _zero(f.metadata.get("kafka_type", "int32"), _is_optional(f))
        plans.append(_FieldPlan(f.name, nested, array, default, zero))
    return tuple(plans)


def _is_optional(f: dataclasses.Field) -> bool:
    from kio.serial._introspect import is_optional

    return is_optional(f)


def build(cls: type, data: Any = None, /, **kwargs: Any) -> Any:
    """Construct ``cls`` from a mapping (or kwargs); nested entities may be mappings too.

    Keys the version does not have are ignored; absent fields get the schema default or the
    Kafka zero value of their type (``ErrorCode.none``, ``0``, ``""``, ``()`` ...).
    """
    values: dict[str, Any] = dict(data or {}, **kwargs)
    args = {}
    for p in _plan(cls):
        if p.name in values:
            v = values[p.name]
            if p.nested is not None and v is not None:
                if p.array:
                    v = tuple(x if isinstance(x, p.nested) else build(p.nested, x) for x in v)
                elif not isinstance(v, p.nested):
                    v = build(p.nested, v)
            elif p.array and v is not None and not isinstance(v, tuple):
                v = tuple(v)
            args[p.name] = v
        elif p.default is not dataclasses.MISSING:
            args[p.name] = p.default
        elif p.nested is not None and not p.array:
            args[p.name] = build(p.nested, {})
        else:
            args[p.name] = p.zero
    return cls(**args)
