"""weir config: targets (topic, broker, broker default, broker logger), without a broker."""

from __future__ import annotations

import pytest

from weir.cli import admin_configs
from weir.cli.admin import AdminCliError
from weir.cli.main import build_parser


def test_exactly_one_target() -> None:
    parse = build_parser().parse_args
    args = parse(["config", "set", "--broker", "2", "log.retention.bytes=10"])
    assert admin_configs._resource(args)[0::2] == ("broker", "2")
    args = parse(["config", "get", "--broker-default", "--all"])
    kind, rtype, name, words = admin_configs._resource(args)
    assert (kind, rtype, name, words) == ("broker-default", None, "", "the broker default")
    args = parse(["config", "delete", "--broker-logger", "1", "weir.server.broker"])
    assert admin_configs._resource(args)[:3] == ("broker-logger", None, "1")
    for bad in (["config", "get"], ["config", "get", "--topic", "t", "--broker", "1"]):
        with pytest.raises(SystemExit):
            parse(bad)
    with pytest.raises(AdminCliError, match="broker id is a number"):
        admin_configs._resource(parse(["config", "get", "--broker", "one"]))


def test_synonym_pairs_from_either_client() -> None:
    assert admin_configs._pairs({"a": 1}) == [("a", 1)]
    assert admin_configs._pairs([("a", 1), ("a", 2)]) == [("a", 1), ("a", 2)]
