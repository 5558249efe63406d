"""``__consumer_offsets`` keys and values that cannot be decoded raise CorruptGroupRecord,
never struct.error, IndexError or a silently short string."""

from __future__ import annotations

import struct

import pytest

from weir.groups import codec


def test_string_running_past_the_end():
    with pytest.raises(codec.CorruptGroupRecord, match="string of 50 bytes"):
        codec.decode_key(struct.pack(">hh", 2, 50) + b"abc")


def test_truncated_integer():
    with pytest.raises(codec.CorruptGroupRecord, match="integer of 8 bytes"):
        codec.decode_offset_value(struct.pack(">h", 3) + b"\x00\x01")


def test_invalid_utf8():
    with pytest.raises(codec.CorruptGroupRecord, match="not UTF-8"):
        codec.decode_key(struct.pack(">hh", 2, 2) + b"\xff\xfe")


def test_member_count_that_cannot_fit():
    good = codec.encode_group_value(codec.GroupRecord("consumer", 1, "range", "m", 0, []))
    with pytest.raises(codec.CorruptGroupRecord, match="array of 2147483647 items"):
        codec.decode_group_value(good[:-4] + struct.pack(">i", (1 << 31) - 1))


@pytest.mark.parametrize("version", [-1, 4, 99])
def test_unknown_value_versions(version):
    with pytest.raises(codec.CorruptGroupRecord, match="unknown"):
        codec.decode_offset_value(struct.pack(">h", version) + b"\x00" * 30)
    with pytest.raises(codec.CorruptGroupRecord, match="unknown"):
        codec.decode_group_value(struct.pack(">h", version) + b"\x00" * 30)
