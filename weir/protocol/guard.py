"""A structural pre-pass that makes kio's native decoder safe on untrusted bytes.

kio's reader is written in Rust and trusts the length prefixes it reads: a compact array
that claims 2**34 elements makes it reserve that many slots before it looks at the bytes,
and a failed allocation aborts the whole process (no Python ``except`` can catch it). Kafka
itself never allocates on a length it has not checked: its generated ``Readable`` code
compares every array, string and bytes length with the bytes remaining in the frame
(``ByteBufferAccessor``), and the frame with ``socket.request.max.bytes``, before it builds
anything.

:func:`check` does the same before kio decodes: it walks the bytes along the schema of the
entity (fields in order, nullable structs of KIP-893, and in flexible versions the tagged
fields of KIP-482) and verifies that every length and count fits in what remains. It
allocates nothing that depends on the input; it only moves a position. The walk is compiled
once per schema class into nested closures. What it does not check (an invalid boolean,
UTF-8, an unknown error code) kio rejects with an ordinary exception afterwards.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Bytes taken by each fixed-size Kafka type.
_FIXED = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
    "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}

# A walker takes (buffer, position, end) and returns the position after its value.
Walker = Callable[[bytes | memoryview, int, int], int]
# A hook sees each length prefix the walk reads: (position, encoding), the encoding being
# "uvarint", "int16", "int32" or "marker" (a nullable struct's int8). Fuzzers use it to find
# the fields worth mutating; the broker's own walkers are compiled without one.
Hook = Callable[[int, str], None] | None


class Truncated(ValueError):
    """A length, count or field runs past the end of the bytes (or is negative)."""


def check(cls: type, buf: bytes | bytearray | memoryview, offset: int = 0,
          hook: Hook = None) -> int:
    """Verify that ``buf[offset:]`` holds a structurally complete ``cls``; return its end.

    Raises :class:`Truncated` naming the field that does not fit.
    """
    if not isinstance(buf, bytes):
        buf = memoryview(buf)
    return _entity_walker(cls, hook)(buf, offset, len(buf))


def _need(pos: int, size: int, end: int, what: str) -> int:
    if size < 0 or pos + size > end:
        raise Truncated(f"{what}: {size} bytes at position {pos}, {max(end - pos, 0)} remain")
    return pos + size


def read_uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most five bytes (Kafka's ``ByteUtils.readUnsignedVarint``)."""
    if pos < end and buf[pos] < 0x80:  # one byte: most lengths and counts
        return buf[pos], pos + 1
    value = shift = 0
    while True:
        if pos >= end:
            raise Truncated(f"varint: runs past the end at position {pos}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise Truncated(f"varint: longer than five bytes at position {pos}")


def _fixed(size: int) -> Walker:
    def walk(buf: bytes | memoryview, pos: int, end: int) -> int:
        if pos + size > end:
            raise Truncated(f"field of {size} bytes at position {pos}: {end - pos} remain")
        return pos + size

    return walk


def _string_like(kafka_type: str, flexible: bool, optional: bool, hook: Hook) -> Walker:
    if flexible:
        def walk_compact(buf: bytes | memoryview, pos: int, end: int) -> int:
            if hook:
                hook(pos, "uvarint")
            n, pos = read_uvarint(buf, pos, end)
            if n == 0:
                if not optional:
                    raise Truncated(f"null {kafka_type} where none is allowed at {pos}")
                return pos
            return _need(pos, n - 1, end, kafka_type)

        return walk_compact
    prefix = _I16 if kafka_type == "string" else _I32
    encoding = "int16" if kafka_type == "string" else "int32"

    def walk_legacy(buf: bytes | memoryview, pos: int, end: int) -> int:
        if hook:
            hook(pos, encoding)
        if pos + prefix.size > end:
            raise Truncated(f"{kafka_type} length at position {pos}: {end - pos} bytes remain")
        (n,) = prefix.unpack_from(buf, pos)
        pos += prefix.size
        if n == -1:
            if not optional:
                raise Truncated(f"null {kafka_type} where none is allowed at {pos}")
            return pos
        return _need(pos, n, end, kafka_type)

    return walk_legacy


def _array(item: Walker, item_min: int, fixed: int | None, flexible: bool, optional: bool,
           hook: Hook) -> Walker:
    """An array of ``item``; ``fixed`` is the item size when every item has the same size.

    A null array where the schema allows none is rejected, as Kafka's generated readers do
    ("non-nullable field was serialized as null"): handlers may rely on getting a tuple.
    """
    least = max(item_min, 1)

    def walk(buf: bytes | memoryview, pos: int, end: int) -> int:
        if hook:
            hook(pos, "uvarint" if flexible else "int32")
        if flexible:
            n, pos = read_uvarint(buf, pos, end)
            count = n - 1  # 0 encodes a null array
        else:
            if pos + 4 > end:
                raise Truncated(f"array length at position {pos}: {end - pos} bytes remain")
            (count,) = _I32.unpack_from(buf, pos)
            pos += 4
            if count < -1:
                raise Truncated(f"array length {count} at position {pos}")
        if count < 0 and not optional:
            raise Truncated(f"null array where none is allowed at position {pos}")
        if count <= 0:
            return pos
        if count * least > end - pos:
            raise Truncated(
                f"array of {count} items at position {pos}: only {end - pos} bytes remain"
            )
        if fixed is not None:
            return _need(pos, count * fixed, end, "array")
        walk_item = item
        for _ in range(count):
            pos = walk_item(buf, pos, end)
        return pos

    return walk


def _nullable_entity(inner: Walker, hook: Hook) -> Walker:
    def walk(buf: bytes | memoryview, pos: int, end: int) -> int:
        if hook:
            hook(pos, "marker")
        if pos >= end:
            raise Truncated(f"nullable struct marker at position {pos}: no bytes remain")
        marker = buf[pos]
        if marker == 0xFF:  # int8 -1: null (KIP-893)
            return pos + 1
        return inner(buf, pos + 1, end)

    return walk


def _field_walker(field: dataclasses.Field, flexible: bool, tagged: bool, hook: Hook
                  ) -> tuple[Walker, int, int | None]:
    """(walker, least bytes, fixed size or None) of one field."""
    kind = classify_field(field)
    optional = False if tagged else is_optional(field)
    kafka_type = field.metadata.get("kafka_type")
    if isinstance(kind, EntityField | EntityTupleField):
        walker: Walker = _entity_walker(kind.type_, hook)
        least, fixed = _entity_least(kind.type_), None
        if isinstance(kind, EntityField) and optional:
            walker, least = _nullable_entity(walker, hook), 1
    elif kafka_type in _FIXED:
        size = _FIXED[kafka_type]
        walker, least, fixed = _fixed(size), size, size  # nullable ones keep their width
    elif kafka_type in ("string", "bytes", "records"):
        # Array items are never null; the field's optionality applies to the array.
        item_optional = optional and not kind.is_array
        walker = _string_like(kafka_type, flexible, item_optional, hook)
        least, fixed = (1 if flexible else (2 if kafka_type == "string" else 4)), None
    else:
        raise TypeError(f"no structural check for {kafka_type!r} field {field.name}")
    if isinstance(kind, EntityTupleField | PrimitiveTupleField):
        return (_array(walker, least, fixed, flexible, optional, hook), 1 if flexible else 4,
                None)
    assert isinstance(kind, EntityField | PrimitiveField)
    return walker, least, fixed


@cache
def _entity_least(cls: type) -> int:
    """The fewest bytes an encoded ``cls`` can take (an array's item bound)."""
    total = 1 if cls.__flexible__ else 0  # the tagged-field count
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is None:
            total += _field_walker(f, cls.__flexible__, False, None)[1]
    return total


def _entity_walker(cls: type, hook: Hook) -> Walker:
    """The walker of ``cls``: compiled once without a hook; built anew with one (hooks are
    per-call closures, and caching them would keep every one alive)."""
    return _cached_walker(cls) if hook is None else _build_walker(cls, hook)


@cache
def _cached_walker(cls: type) -> Walker:
    return _build_walker(cls, None)


def _build_walker(cls: type, hook: Hook) -> Walker:
    flexible = bool(cls.__flexible__)
    inline: list[Walker] = []
    tagged: dict[int, Walker] = {}
    # Consecutive fixed-size fields are checked as one run.
    run = 0
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            tagged[tag] = _field_walker(f, flexible, True, hook)[0]
            continue
        walker, _least, fixed = _field_walker(f, flexible, False, hook)
        if fixed is not None:
            run += fixed
            continue
        if run:
            inline.append(_fixed(run))
            run = 0
        inline.append(walker)
    if run:
        inline.append(_fixed(run))
    steps = tuple(inline)
    if not flexible:
        def walk_plain(buf: bytes | memoryview, pos: int, end: int) -> int:
            for step in steps:
                pos = step(buf, pos, end)
            return pos

        return walk_plain

    def walk_flexible(buf: bytes | memoryview, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        return walk_tagged_fields(buf, pos, end, tagged, hook)

    return walk_flexible


def walk_tagged_fields(buf: bytes | memoryview, pos: int, end: int,
                       known: dict[int, Walker] | None = None, hook: Hook = None) -> int:
    """The tagged-field section (KIP-482): a count, then (tag, size, bytes) each."""
    if hook:
        hook(pos, "uvarint")
    elif pos < end and buf[pos] == 0:  # no tagged fields: nearly always
        return pos + 1
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:
        raise Truncated(f"{count} tagged fields at position {pos}: {end - pos} bytes remain")
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        if hook:
            hook(pos, "uvarint")
        size, pos = read_uvarint(buf, pos, end)
        field_end = _need(pos, size, end, f"tagged field {tag}")
        walker = known.get(tag) if known else None
        if walker is not None:
            walker(buf, pos, field_end)
        pos = field_end
    return pos
