"""The CLI's error surface without a cluster: Kafka's error names, one line per failure
(JSON under --json), a bounded failure on an unreachable cluster, help on every option, and
a start-up that imports only the command being run."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import pytest

from weir.cli import errors
from weir.cli import main as cli
from weir.ops.zkview import BrokerRow, PartitionRow, Snapshot, filter_snapshot, snapshot_json
from weir.ports import free_port


class FakeKafkaError:
    def __init__(self, name: str, code: int = 0) -> None:
        self._name, self._code = name, code

    def name(self) -> str:
        return self._name

    def code(self) -> int:
        return self._code

    def str(self) -> str:
        return "text"


@pytest.mark.parametrize(("librdkafka", "kafka"), [
    ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION"),
    ("TOPIC_EXCEPTION", "INVALID_TOPIC_EXCEPTION"),
    ("_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION"),
    ("NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER"),
    ("_TRANSPORT", "NETWORK_EXCEPTION"),
    ("_TIMED_OUT", "REQUEST_TIMED_OUT"),
    ("TOPIC_ALREADY_EXISTS", "TOPIC_ALREADY_EXISTS"),
    ("_SOMETHING_NEW", "SOMETHING_NEW"),
])
def test_librdkafka_names_become_kafka_names(librdkafka: str, kafka: str) -> None:
    assert errors.kafka_name(FakeKafkaError(librdkafka)) == kafka
    assert errors.kafka_error_text(Exception(FakeKafkaError(librdkafka))) == f"{kafka}: text"


def test_every_error_has_a_name() -> None:
    assert errors.error_name(errors.CliError("creating topic t: TOPIC_ALREADY_EXISTS: x")) \
        == "TOPIC_ALREADY_EXISTS"
    assert errors.error_name(errors.CliError("nothing to change")) == "INVALID_ARGUMENT"
    assert errors.error_name(errors.CliError("x", name="BROKER_NOT_AVAILABLE")) \
        == "BROKER_NOT_AVAILABLE"
    assert errors.error_name(FileNotFoundError(2, "No such file")) == "IO_ERROR"
    assert errors.error_name(ZeroDivisionError("boom")) == "INTERNAL_ERROR"
    assert errors.error_message(errors.CliError("nothing to change")) == \
        "INVALID_ARGUMENT: nothing to change"
    assert errors.error_message(errors.CliError("a: GROUP_ID_NOT_FOUND: b")) == \
        "a: GROUP_ID_NOT_FOUND: b"


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def test_usage_errors_are_one_line(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["topic", "create", "t", "--partitions", "many"])
    assert exit_info.value.code == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("weir topic create: error: argument --partitions")


def test_unexpected_exception_is_one_named_line(monkeypatch, capsys) -> None:
    def explode(args: argparse.Namespace) -> int:
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(cli.COMMANDS, "down", explode)
    assert cli.main(["down"]) == 1
    assert _one_line(capsys.readouterr().err).startswith(
        "weir: INTERNAL_ERROR: ZeroDivisionError: boom")
    monkeypatch.setitem(cli.COMMANDS, "down", lambda args: (_ for _ in ()).throw(
        BrokenPipeError()))
    assert cli.main(["down"]) == errors.EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_unreachable_cluster_fails_at_once_with_a_name(capsys) -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    assert cli.main(["topic", "list", "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    assert time.monotonic() - started < 5
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"weir: cannot reach the cluster at 127.0.0.1:{port}: "
                           "NETWORK_EXCEPTION: ")
    assert cli.main(["config", "set", "--broker", "1", "a=b", "--json",
                     "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    doc = json.loads(_one_line(capsys.readouterr().err))
    assert doc["error"] == "NETWORK_EXCEPTION" and doc["command"] == "weir config set"
    assert cli.main(["topic", "list", "--bootstrap-server", "no-port"]) == 1
    assert "INVALID_ARGUMENT: --bootstrap-server" in _one_line(capsys.readouterr().err)


def test_timeout_default_is_bounded_and_checked() -> None:
    args = cli.build_parser().parse_args(["topic", "list"])
    assert 0 < args.timeout <= 10
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["topic", "list", "--timeout", "0"])


def _walk(parser: argparse.ArgumentParser, path: list[str]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, [*path, name])
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(path), action


def test_every_option_has_help_and_shows_its_default() -> None:
    parser = cli.build_parser()
    missing = [(where, a.option_strings or a.dest) for where, a in _walk(parser, ["weir"])
               if not a.help]
    assert missing == []
    text = cli.build_parser("status")._subparsers._group_actions[0].choices[
        "status"].format_help()
    assert "(default: 10.0)" in " ".join(text.split())


def test_stubs_of_weir_help_match_the_real_parsers() -> None:
    full = cli.build_parser()._subparsers._group_actions[0]
    helps = {a.dest: a.help for a in full._choices_actions}
    assert helps == {name: text for name, (text, _) in cli.SUBCOMMANDS.items()}
    assert set(full.choices) == set(cli.SUBCOMMANDS)


@pytest.mark.parametrize("argv", [["--help"], ["topic", "--help"], ["acl", "list", "--help"]])
def test_help_imports_no_client(argv: list[str]) -> None:
    """`weir --help` and a command's help load no Kafka client, codec or broker config."""
    code = ("import sys\nsys.argv = ['weir', *sys.argv[1:]]\nfrom weir.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = ['confluent_kafka', 'kio', 'hypothesis', 'weir.config', 'kazoo',"
            " 'weir.protocol.codec', 'weir.verify.nemesis']\n"
            "print(sorted(m for m in heavy if sys.modules.get(m) is not None), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "usage: weir" in done.stdout


def _snapshot() -> Snapshot:
    return Snapshot(brokers=[BrokerRow(1, ["h:1"]), BrokerRow(2, ["h:2"])], controller_id=1,
                    controller_epoch=3, partitions=[
                        PartitionRow("__consumer_offsets", 0, 1, 0, [1], [1]),
                        PartitionRow("a", 0, 1, 2, [1, 2], [1, 2]),
                        PartitionRow("a", 1, 2, 2, [2, 1], [2]),
                        PartitionRow("b", 0, 3, 1, [3], [3]),
                        PartitionRow("b", 1, -1, 1, [3], [])])


def test_status_hides_internal_topics_and_filters_like_kafka_topics() -> None:
    snap = _snapshot()
    assert [p.topic for p in filter_snapshot(snap).partitions] == ["a", "a", "b", "b"]
    assert len(filter_snapshot(snap, include_internal=True).partitions) == 5
    under = filter_snapshot(snap, under_replicated=True).partitions
    assert [(p.topic, p.partition) for p in under] == [("a", 1), ("b", 1)]
    down = filter_snapshot(snap, unavailable=True).partitions
    assert [(p.topic, p.partition) for p in down] == [("b", 0), ("b", 1)]
    doc = snapshot_json(filter_snapshot(snap, unavailable=True))
    assert doc["controller"] == 1 and [p["status"] for p in doc["partitions"]] == [
        "OFFLINE", "OFFLINE"]
    assert doc["partitions"][1]["leader"] is None


def test_group_list_state_filter_takes_kafka_state_names() -> None:
    from weir.cli import admin_groups

    assert admin_groups._states("stable,EMPTY") == {"Stable", "Empty"}
    assert admin_groups._states(None) is None
    with pytest.raises(errors.CliError, match="unknown group state 'Bogus'"):
        admin_groups._states("Bogus")


@pytest.mark.parametrize("module", ["topics", "configs", "acls", "consumer_groups"])
def test_kafka_tool_help_imports_no_client(module: str) -> None:
    code = (f"import sys\nfrom weir.cli.kafka_tools.{module} import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = ['confluent_kafka', 'kio', 'weir.config', 'weir.ops.secure']\n"
            "print(sorted(m for m in heavy if sys.modules.get(m) is not None), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "--bootstrap-server" in done.stdout


@pytest.mark.parametrize("module", ["topics", "configs", "acls", "consumer_groups"])
def test_kafka_tool_options_have_help(module: str) -> None:
    import importlib

    parser = importlib.import_module(f"weir.cli.kafka_tools.{module}").build_parser()
    assert [a.option_strings for _, a in _walk(parser, [module]) if not a.help] == []
    assert "(default: 10.0)" in " ".join(parser.format_help().split())


def test_kafka_tools_bad_options_are_one_line() -> None:
    from weir.cli.kafka_tools import common, topics

    done = subprocess.run([sys.executable, "-m", "weir.cli.kafka_tools.topics",
                           "--bootstrap-server", "127.0.0.1:1", "--list", "--create"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert _one_line(done.stderr).startswith(
        "kafka-topics.sh: INVALID_ARGUMENT: Command must include exactly one action")
    assert common.key_values(["a=1,b=[x,y]", "c=2"], "--add-config") == [
        ("a", "1"), ("b", "x,y"), ("c", "2")]
    assert topics._include("a,b.*").fullmatch("bcd") is not None
    assert topics._replica_assignment("1:2,2:1") == [[1, 2], [2, 1]]
    with pytest.raises(errors.CliError, match="different replication factor"):
        topics._replica_assignment("1:2,2")
