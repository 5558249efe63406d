"""kafka-leader-election's JSON file and result lines."""

from __future__ import annotations

import pytest

from weir.cli.admin import AdminCliError
from weir.cli.elect import _text, parse_election_file


def test_election_file_in_kafkas_format():
    text = '{"partitions": [{"topic": "b", "partition": 1}, {"topic": "a", "partition": 0}]}'
    assert parse_election_file(text) == [("a", 0), ("b", 1)]
    for bad, match in (('{"partition": []}', 'missing "partitions"'),
                       ('{"partitions": []}', "empty"),
                       ('{"partitions": [{"topic": "a"}]}', "bad partition entry"),
                       ("[", "not JSON")):
        with pytest.raises(AdminCliError, match=match):
            parse_election_file(bad)
    dup = '{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}'
    with pytest.raises(AdminCliError, match="duplicate partitions: a-0"):
        parse_election_file(dup)


def test_result_lines_as_kafkas_tool_prints_them():
    rows = [{"topic": "a", "partition": 0, "result": "ELECTED", "message": None},
            {"topic": "a", "partition": 1, "result": "ELECTION_NOT_NEEDED", "message": None},
            {"topic": "b", "partition": 0, "result": "PREFERRED_LEADER_NOT_AVAILABLE",
             "message": "broker 3 is down"}]
    assert _text("PREFERRED", rows).splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions a-0",
        "Valid replica already elected for partitions a-1",
        ("Error completing leader election (PREFERRED) for partition: b-0: "
         "PREFERRED_LEADER_NOT_AVAILABLE: broker 3 is down"),
        "1 replica(s) could not be elected"]
