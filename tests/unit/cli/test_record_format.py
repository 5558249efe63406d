"""Console producer line parsing and consumer formatting (Kafka's LineMessageReader and
DefaultMessageFormatter rules)."""

from __future__ import annotations

import pytest

from weir.cli.record_format import (
    FormatError,
    Formatter,
    LineReader,
    Record,
    read_json_line,
    record_json,
    to_bytes,
    to_text,
)


def test_plain_lines_are_values():
    rec = LineReader().read("hello\tworld")
    assert (rec.key, rec.value, rec.headers) == (None, b"hello\tworld", [])


def test_keys_and_headers_with_default_separators():
    reader = LineReader.from_properties({"parse.key": "true", "parse.headers": "true"})
    rec = reader.read("h1:v1,h2:v2\tk\tv\twith tab")
    assert (rec.key, rec.value) == (b"k", b"v\twith tab")
    assert rec.headers == [("h1", b"v1"), ("h2", b"v2")]


def test_custom_separators_escapes_and_null_marker():
    reader = LineReader.from_properties({"parse.key": "true", "key.separator": "::",
                                         "null.marker": "<null>"})
    assert reader.read("a::b").key == b"a"
    rec = reader.read("<null>::<null>")
    assert (rec.key, rec.value) == (None, None)
    tabbed = LineReader.from_properties({"parse.key": "true", "key.separator": "\\t"})
    assert tabbed.read("k\tv").key == b"k"


def test_missing_separators_fail_with_the_line_number_unless_ignored():
    reader = LineReader.from_properties({"parse.key": "true"})
    reader.read("k\tv")
    with pytest.raises(FormatError, match="No key separator found on line number 2"):
        reader.read("no key")
    lenient = LineReader.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.read("no key") == Record(value=b"no key")
    headers = LineReader.from_properties({"parse.headers": "true"})
    with pytest.raises(FormatError, match="No header key separator found in pair 'bad'"):
        headers.read("bad\tvalue")


def test_bad_properties_are_refused():
    with pytest.raises(FormatError, match="unknown producer --property: parse.keys"):
        LineReader.from_properties({"parse.keys": "true"})
    with pytest.raises(FormatError, match="null.marker and key.separator may not be equal"):
        LineReader.from_properties({"null.marker": "|", "key.separator": "|"})
    with pytest.raises(FormatError, match="unknown consumer --property"):
        Formatter.from_properties({"print.everything": "true"})


def test_binary_encodings():
    assert to_bytes("00ff", "hex") == b"\x00\xff" and to_text(b"\x00\xff", "hex") == "00ff"
    assert to_bytes("AP8=", "base64") == b"\x00\xff" and to_text(b"\x00\xff", "base64") == "AP8="
    for bad, enc in (("0g", "hex"), ("***", "base64")):
        with pytest.raises(FormatError):
            to_bytes(bad, enc)
    reader = LineReader.from_properties({"parse.key": "true"}, encoding="hex")
    assert reader.read("01\tff").value == b"\xff"


def test_json_lines():
    rec = read_json_line('{"key": "k", "value": {"n": 1}, "headers": {"a": "b"}, '
                         '"partition": 2, "timestamp": 5}')
    assert (rec.key, rec.value, rec.headers, rec.partition, rec.timestamp) == (
        b"k", b'{"n": 1}', [("a", b"b")], 2, 5)
    listed = read_json_line('{"value": null, "headers": [{"key": "x", "value": null}, '
                            '["y", "z"]]}')
    assert (listed.value, listed.headers) == (None, [("x", None), ("y", b"z")])
    assert read_json_line('"just a value"').value == b"just a value"
    for bad in ("{", '{"valu": 1}', '{"partition": "x"}'):
        with pytest.raises(FormatError):
            read_json_line(bad)


def test_formatter_follows_kafkas_order_and_literals():
    rec = Record(value=b"v", key=None, headers=[("h", b"1"), ("n", None)], partition=3,
                 offset=7, timestamp=1000, topic="t")
    fmt = Formatter.from_properties({p: "true" for p in (
        "print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")})
    assert fmt.format(rec) == "CreateTime:1000\tPartition:3\tOffset:7\th:1,n:null\tnull\tv\n"
    plain = Formatter()
    assert plain.format(rec) == "v\n"
    bare = Formatter.from_properties({"print.headers": "true", "print.value": "false",
                                      "line.separator": ";"})
    assert bare.format(Record(value=b"v")) == "NO_HEADERS;"
    assert Formatter(print_timestamp=True).format(Record(b"v", timestamp_type=0)) == (
        "NO_TIMESTAMP\tv\n")
    doc = record_json(rec, "base64")
    assert doc["value"] == "dg==" and doc["key"] is None and doc["timestamp_type"] == "CreateTime"
    assert doc["headers"] == [{"key": "h", "value": "MQ=="}, {"key": "n", "value": None}]
