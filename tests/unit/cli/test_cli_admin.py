"""weir topic|group|config: argument parsing, bootstrap resolution, tables (no broker)."""

from __future__ import annotations

import argparse
import json

import pytest

from weir.cli import admin
from weir.cli.main import build_parser, main


def test_parser_reads_topic_create_and_config_set() -> None:
    args = build_parser().parse_args(
        ["topic", "create", "t", "--partitions", "3", "--config", "retention.ms=1000",
         "--config", "cleanup.policy=compact", "--json"])
    assert (args.command, args.topic_command, args.name, args.partitions) == (
        "topic", "create", "t", 3)
    assert args.configs == [("retention.ms", "1000"), ("cleanup.policy", "compact")]
    assert args.json and args.replication_factor == -1
    args = build_parser().parse_args(["config", "set", "--topic", "t", "a=1", "b=2"])
    assert args.pairs == [("a", "1"), ("b", "2")]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["config", "set", "--topic", "t", "novalue"])


def test_bootstrap_from_flag_or_cluster_json(tmp_path) -> None:
    ns = argparse.Namespace(bootstrap_server="h:1", data_dir=str(tmp_path))
    assert admin.bootstrap_of(ns) == "h:1"
    (tmp_path / "cluster.json").write_text(json.dumps({"bootstrap": "127.0.0.1:9092"}))
    ns.bootstrap_server = None
    assert admin.bootstrap_of(ns) == "127.0.0.1:9092"
    ns.data_dir = str(tmp_path / "nothing")
    with pytest.raises(admin.AdminCliError, match="--bootstrap-server"):
        admin.bootstrap_of(ns)


def test_no_cluster_names_the_directory_it_looked_in(tmp_path, monkeypatch) -> None:
    """Run from another directory, `weir topic list` says where it looked (absolute) and
    how to point it at the cluster, not only `./weir-data`."""
    monkeypatch.chdir(tmp_path)
    ns = argparse.Namespace(bootstrap_server=None, data_dir="./weir-data")
    with pytest.raises(admin.AdminCliError) as info:
        admin.bootstrap_of(ns)
    assert str(info.value) == (f"no cluster recorded in {tmp_path.resolve() / 'weir-data'} "
                               "(weir up starts one there; --data-dir names the directory of "
                               "one), or use --bootstrap-server")


def test_no_cluster_is_a_plain_error(tmp_path, capsys) -> None:
    rc = main(["topic", "list", "--data-dir", str(tmp_path)])
    assert rc == 1
    assert "no cluster recorded" in capsys.readouterr().err


def test_alter_config_needs_a_change(tmp_path, capsys) -> None:
    rc = main(["topic", "alter-config", "t", "--bootstrap-server", "127.0.0.1:1"])
    assert rc == 1 and "nothing to change" in capsys.readouterr().err


def test_table_aligns_columns() -> None:
    out = admin.table(("A", "LONGER"), [("xyz", 1), (None, "two")])
    assert out.splitlines() == ["A    LONGER", "xyz  1", "     two"]
