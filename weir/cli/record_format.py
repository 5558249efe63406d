"""Reading and printing records for ``weir produce`` / ``weir consume`` (sans-I/O).

Text input follows Kafka's console producer (``LineMessageReader``) and its properties:
``parse.key`` / ``key.separator`` (tab), ``parse.headers`` / ``headers.delimiter`` (tab) /
``headers.separator`` (``,``) / ``headers.key.separator`` (``:``), ``ignore.error`` and
``null.marker``.  A line reads ``[headers<delimiter>][key<separator>]value``.

Text output follows the console consumer's ``DefaultMessageFormatter``: ``print.timestamp``
(``CreateTime:1700000000000``), ``print.partition`` (``Partition:0``), ``print.offset``
(``Offset:5``), ``print.headers`` (``k:v,k2:v2`` or ``NO_HEADERS``), ``print.key``,
``print.value`` in that order, joined by ``key.separator`` (tab), each record ended by
``line.separator``; ``null.literal`` (``null``) stands for a null key, value or header value.

JSON lines (``--format json``) carry ``key``, ``value``, ``headers`` (a list of
``{"key", "value"}``), and on output ``topic``, ``partition``, ``offset``, ``timestamp`` and
``timestamp_type``.  ``--encoding`` turns bytes into text: ``utf8`` (default), ``hex`` or
``base64`` for binary keys, values and header values.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENCODINGS = ("utf8", "hex", "base64")
TIMESTAMP_TYPES = {0: "NO_TIMESTAMP", 1: "CreateTime", 2: "LogAppendTime"}


class FormatError(ValueError):
    """Input that cannot be turned into a record, or a bad property."""


Header = tuple[str, bytes | None]


@dataclass
class Record:
    """A record to produce, or one consumed (then with its position)."""

    value: bytes | None
    key: bytes | None = None
    headers: list[Header] = field(default_factory=list)
    partition: int | None = None
    timestamp: int | None = None
    topic: str | None = None
    offset: int | None = None
    timestamp_type: int = 1


# -- bytes <-> text -----------------------------------------------------------------------------


def to_bytes(text: str | None, encoding: str) -> bytes | None:
    if text is None:
        return None
    try:
        if encoding == "hex":
            return bytes.fromhex(text)
        if encoding == "base64":
            return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise FormatError(f"not {encoding}: {text[:40]!r} ({exc})") from None
    return text.encode("utf-8")


def to_text(data: bytes | None, encoding: str) -> str | None:
    if data is None:
        return None
    if encoding == "hex":
        return data.hex()
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", errors="replace")


# -- properties ---------------------------------------------------------------------------------


def _flag(props: Mapping[str, str], key: str, default: bool = False) -> bool:
    return props[key].strip().lower() == "true" if key in props else default


def _unescape(text: str) -> str:
    """``\\t``, ``\\n`` and friends as the shell cannot easily pass them."""
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


@dataclass
class LineReader:
    """Kafka's LineMessageReader over one line at a time."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None
    encoding: str = "utf8"
    line_number: int = 0

    KEYS = ("parse.key", "key.separator", "parse.headers", "headers.delimiter",
            "headers.separator", "headers.key.separator", "ignore.error", "null.marker")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], encoding: str = "utf8") -> LineReader:
        unknown = sorted(set(props) - set(cls.KEYS))
        if unknown:
            raise FormatError(f"unknown producer --property: {', '.join(unknown)} (known: "
                              f"{', '.join(cls.KEYS)})")
        get = {k: _unescape(v) for k, v in props.items()}
        reader = cls(parse_key=_flag(props, "parse.key"),
                     key_separator=get.get("key.separator", "\t"),
                     parse_headers=_flag(props, "parse.headers"),
                     headers_delimiter=get.get("headers.delimiter", "\t"),
                     headers_separator=get.get("headers.separator", ","),
                     headers_key_separator=get.get("headers.key.separator", ":"),
                     ignore_error=_flag(props, "ignore.error"),
                     null_marker=get.get("null.marker"), encoding=encoding)
        for name in ("key_separator", "headers_separator", "headers_delimiter",
                     "headers_key_separator"):
            if not getattr(reader, name):
                raise FormatError(f"{name.replace('_', '.')} may not be empty")
            if reader.null_marker is not None and reader.null_marker == getattr(reader, name):
                raise FormatError(f"null.marker and {name.replace('_', '.')} may not be equal")
        return reader

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return to_bytes(text, self.encoding)

    def _part(self, enabled: bool, line: str, start: int, mark: str, name: str) -> str | None:
        if not enabled:
            return None
        index = line.find(mark, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise FormatError(f"No {name} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def read(self, line: str) -> Record:
        """One input line (without its line ending) as a record."""
        self.line_number += 1
        headers = self._part(self.parse_headers, line, 0, self.headers_delimiter,
                             "headers delimiter")
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, line, start, self.key_separator, "key separator")
        start += 0 if key is None else len(key) + len(self.key_separator)
        record = Record(value=self._bytes(line[start:]), key=self._bytes(key))
        if headers is not None and headers != self.null_marker:
            record.headers = [self._header(pair) for pair in headers.split(
                self.headers_separator)]
        return record

    def _header(self, pair: str) -> Header:
        name, sep, value = pair.partition(self.headers_key_separator)
        if not sep:
            if self.ignore_error:
                return pair, None
            raise FormatError(f"No header key separator found in pair '{pair}' on line "
                              f"number {self.line_number}")
        if name == self.null_marker:
            raise FormatError(f"Header keys should not be equal to the null marker "
                              f"'{self.null_marker}' as they can't be null")
        return name, self._bytes(value)


def read_json_line(line: str, encoding: str = "utf8") -> Record:
    """``{"value": ..., "key": ..., "headers": [...] | {...}, "partition": N,
    "timestamp": ms}``; a bare JSON string or number is a value."""
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise FormatError(f"not a JSON line: {exc}") from None
    if not isinstance(doc, dict):
        return Record(value=to_bytes(doc if isinstance(doc, str) else json.dumps(doc),
                                     encoding))
    unknown = sorted(set(doc) - {"key", "value", "headers", "partition", "timestamp"})
    if unknown:
        raise FormatError(f"unknown field(s) in a JSON record: {', '.join(unknown)}")
    raw = doc.get("headers") or []
    pairs = raw.items() if isinstance(raw, dict) else [
        (h["key"], h.get("value")) if isinstance(h, dict) else tuple(h) for h in raw]
    try:
        headers = [(str(k), to_bytes(None if v is None else str(v), encoding))
                   for k, v in pairs]
        partition = None if doc.get("partition") is None else int(doc["partition"])
        timestamp = None if doc.get("timestamp") is None else int(doc["timestamp"])
    except (TypeError, ValueError, KeyError) as exc:
        raise FormatError(f"bad field in a JSON record: {exc}") from None
    if partition is not None and not -1 <= partition < 2**31:  # Kafka's INT32
        raise FormatError(f"bad field in a JSON record: partition {partition} is not a "
                          f"partition number")
    if timestamp is not None and not 0 <= timestamp < 2**63:  # Kafka's INT64
        raise FormatError(f"bad field in a JSON record: timestamp {timestamp} is not a time "
                          f"in milliseconds since the epoch")
    return Record(value=_field(doc.get("value"), encoding), key=_field(doc.get("key"), encoding),
                  headers=headers, partition=partition, timestamp=timestamp)


def _field(value: Any, encoding: str) -> bytes | None:
    if value is None:
        return None
    return to_bytes(value if isinstance(value, str) else json.dumps(value), encoding)


# -- output -------------------------------------------------------------------------------------


@dataclass
class Formatter:
    """Kafka's DefaultMessageFormatter."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    null_literal: str = "null"
    encoding: str = "utf8"

    KEYS = ("print.timestamp", "print.partition", "print.offset", "print.headers",
            "print.key", "print.value", "key.separator", "line.separator",
            "headers.separator", "null.literal")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], encoding: str = "utf8") -> Formatter:
        unknown = sorted(set(props) - set(cls.KEYS))
        if unknown:
            raise FormatError(f"unknown consumer --property: {', '.join(unknown)} (known: "
                              f"{', '.join(cls.KEYS)})")
        get = {k: _unescape(v) for k, v in props.items()}
        return cls(print_timestamp=_flag(props, "print.timestamp"),
                   print_partition=_flag(props, "print.partition"),
                   print_offset=_flag(props, "print.offset"),
                   print_headers=_flag(props, "print.headers"),
                   print_key=_flag(props, "print.key"),
                   print_value=_flag(props, "print.value", True),
                   key_separator=get.get("key.separator", "\t"),
                   line_separator=get.get("line.separator", "\n"),
                   headers_separator=get.get("headers.separator", ","),
                   null_literal=get.get("null.literal", "null"), encoding=encoding)

    def _text(self, data: bytes | None) -> str:
        text = to_text(data, self.encoding)
        return self.null_literal if text is None else text

    def format(self, record: Record) -> str:
        """The record as the console consumer prints it, line separator included."""
        fields = []
        if self.print_timestamp:
            kind = TIMESTAMP_TYPES.get(record.timestamp_type, "NO_TIMESTAMP")
            fields.append("NO_TIMESTAMP" if kind == "NO_TIMESTAMP"
                          else f"{kind}:{record.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}")
        if self.print_offset:
            fields.append(f"Offset:{record.offset}")
        if self.print_headers:
            fields.append(self.headers_separator.join(
                f"{k}:{self._text(v)}" for k, v in record.headers) or "NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key))
        if self.print_value:
            fields.append(self._text(record.value))
        # Kafka ends the line only after the value; Weir ends it whatever is printed
        return self.key_separator.join(fields) + self.line_separator


def record_json(record: Record, encoding: str = "utf8") -> dict[str, Any]:
    """A consumed record as one JSON object (``--json``)."""
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp,
            "timestamp_type": TIMESTAMP_TYPES.get(record.timestamp_type, "NO_TIMESTAMP"),
            "key": to_text(record.key, encoding), "value": to_text(record.value, encoding),
            "headers": [{"key": k, "value": to_text(v, encoding)} for k, v in record.headers]}
