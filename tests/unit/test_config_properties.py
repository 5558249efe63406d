"""``.properties`` I/O: what is written reads back the same (here and by Java's grammar, which
javaproperties implements), in-place edits keep the rest of the file, and values stay readable
(``weir up --set``, ``client.properties`` with a JAAS config)."""

from __future__ import annotations

import javaproperties
import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.config import (
    ConfigError,
    format_property,
    parse_properties,
    read_properties,
    write_properties,
)

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="admin" password="p=ss:w#rd!";')

TRICKY = {
    "sasl.jaas.config": JAAS,
    "zookeeper.connect": "127.0.0.1:2181,127.0.0.2:2181/weir",
    "listeners": "PLAINTEXT://[::1]:9092,SSL://:9093",
    "key with spaces=and:separators#!": "v",
    "leading": "   three spaces",
    "trailing": "space  ",
    "backslash": r"C:\dir\file",
    "unicode": "naïve café ✓ \U0001f600",
    "controls": "tab\there\nnewline\rcr\fff",
    "empty": "",
    "#not-a-comment": "!x",
}


def test_round_trip_of_tricky_values(tmp_path) -> None:
    path = tmp_path / "client.properties"
    write_properties(path, TRICKY)
    assert read_properties(path) == TRICKY
    assert javaproperties.loads(path.read_text(encoding="utf-8")) == TRICKY  # Java's grammar


def test_values_stay_readable(tmp_path) -> None:
    path = tmp_path / "server.properties"
    write_properties(path, {"sasl.jaas.config": JAAS, "zookeeper.connect": "zk:2181/weir",
                            "unicode": "café"})
    text = path.read_text(encoding="utf-8")
    assert f"sasl.jaas.config={JAAS}\n" in text
    assert "zookeeper.connect=zk:2181/weir\n" in text
    assert "unicode=café\n" in text
    assert format_property("a b", " x") == r"a\ b=\ x"


@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=8))
def test_round_trip_any_text(props: dict[str, str]) -> None:
    text = "".join(format_property(k, v) + "\n" for k, v in props.items())
    assert parse_properties(text) == props


def test_update_in_place_keeps_comments_order_and_drops_duplicates(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# top\r\nbroker.id=0\r\n\r\n! bang comment\r\nlog.dirs=/a\r\n"
                    "log.dirs=/b\r\nnum.partitions = 3", encoding="utf-8")
    write_properties(path, {"log.dirs": "/c", "auto.create.topics.enable": False})
    assert read_properties(path) == {"broker.id": "0", "log.dirs": "/c",
                                     "num.partitions": "3",
                                     "auto.create.topics.enable": "false"}
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == ["# top", "broker.id=0", "", "! bang comment", "log.dirs=/c",
                     "num.partitions = 3", "auto.create.topics.enable=false"]


def test_header_only_for_a_new_file(tmp_path) -> None:
    path = tmp_path / "a.properties"
    write_properties(path, {"k": 1}, header="first")
    write_properties(path, {"j": 2}, header="second")
    assert path.read_text(encoding="utf-8") == "# first\nk=1\nj=2\n"


def test_last_duplicate_wins_when_reading() -> None:
    assert parse_properties("k=1\nk=2\n") == {"k": "2"}


def test_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="uXXXX"):
        parse_properties("k=\\u12G4\n")
