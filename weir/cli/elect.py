"""``weir elect``: kafka-leader-election.sh for Weir, through ElectLeaders (KIP-460).

``--type preferred`` moves leadership back to each partition's preferred replica (the first
of its assignment) where that replica is alive and in the ISR; ``--type unclean`` elects a
leader for partitions that have none, out of sync if need be (KIP-460's unclean election).
The scope is one partition (``--topic T --partition P``), a JSON file in Kafka's format
(``{"partitions": [{"topic": "foo", "partition": 1}]}``) or ``--all-topic-partitions``.

Results are printed as Kafka's tool prints them: elected partitions, partitions that needed
no election (ELECTION_NOT_NEEDED: "Valid replica already elected"), and one error line per
partition that failed; any failure makes the exit code 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from weir.cli import int32
from weir.cli.admin_common import AdminCliError, _common, admin_client, kafka_name, wait

# librdkafka's names where Kafka's differ (the ones ElectLeaders answers with)


def add_parser(sub: Any) -> None:
    p = _common(sub.add_parser(
        "elect", help="preferred or unclean leader election (kafka-leader-election.sh)"))
    p.add_argument("--type", "--election-type", dest="election_type", required=True,
                   type=str.lower, choices=("preferred", "unclean"),
                   help="preferred: back to the first replica; unclean: leaderless "
                        "partitions, out of sync if need be")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", help="one topic (with --partition)")
    scope.add_argument("--all-topic-partitions", action="store_true",
                       help="every partition eligible for this type of election")
    scope.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions": [{"topic": "foo", "partition": 1}, ...]}')
    p.add_argument("--partition", type=int32, help="the partition of --topic")


def parse_election_file(text: str) -> list[tuple[str, int]]:
    """Kafka's election JSON: its partitions, refusing duplicates as Kafka does."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise AdminCliError(f"the election file is not JSON: {exc}") from None
    if not isinstance(doc, dict) or "partitions" not in doc:
        raise AdminCliError('Replica election data is missing "partitions" field')
    try:
        parts = [(str(p["topic"]), int(p["partition"])) for p in doc["partitions"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise AdminCliError(f"bad partition entry in the election file: {exc}") from None
    dupes = sorted({tp for tp in parts if parts.count(tp) > 1})
    if dupes:
        raise AdminCliError("Replica election data contains duplicate partitions: "
                            + ", ".join(f"{t}-{p}" for t, p in dupes))
    if not parts:
        raise AdminCliError("Replica election data is empty")
    return sorted(set(parts))


def _scope(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        if args.partition is not None:
            raise AdminCliError("--partition goes with --topic only")
        return None
    if args.path_to_json_file:
        if args.partition is not None:
            raise AdminCliError("--partition goes with --topic only")
        try:
            text = Path(args.path_to_json_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise AdminCliError(f"cannot read {args.path_to_json_file}: {exc}") from None
        return parse_election_file(text)
    if args.partition is None:
        raise AdminCliError("--partition is required with --topic")
    return [(args.topic, args.partition)]


def cmd_elect(args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    kind = ElectionType.PREFERRED if args.election_type == "preferred" else ElectionType.UNCLEAN
    scope = _scope(args)
    admin = admin_client(args)
    request = None if scope is None else [TopicPartition(t, p) for t, p in scope]
    # confluent-kafka 2.x's elect_leaders passes keyword options on wrongly (a TypeError):
    # the timeouts come from the client's socket.timeout.ms (--timeout) instead.
    outcome = wait(admin.elect_leaders(kind, request), args,
                   f"{args.election_type} leader election")
    results = []
    for tp, error in sorted(outcome.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        err = error.args[0] if isinstance(error, Exception) and error.args else error
        if err is None:
            status, message = "ELECTED", None
        elif err.code() == KafkaError.ELECTION_NOT_NEEDED:
            status, message = "ELECTION_NOT_NEEDED", None
        else:
            status, message = kafka_name(err), err.str()
        results.append({"topic": tp.topic, "partition": tp.partition, "result": status,
                        "message": message})
    name = kind.name
    failed = [r for r in results if r["result"] not in ("ELECTED", "ELECTION_NOT_NEEDED")]
    if args.json:
        print(json.dumps({"election_type": name, "results": results}, indent=2))
    else:
        print(_text(name, results))
    if failed:  # Kafka's lines above (stdout), one error line naming the first failure
        raise AdminCliError(f"electing leaders ({name}): {failed[0]['result']}: "
                            f"{len(failed)} of {len(results)} partition(s) could not be "
                            "elected", name=str(failed[0]["result"]))
    return 0


def _tps(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['topic']}-{r['partition']}" for r in rows)


def _text(name: str, results: list[dict[str, Any]]) -> str:
    elected = [r for r in results if r["result"] == "ELECTED"]
    noop = [r for r in results if r["result"] == "ELECTION_NOT_NEEDED"]
    failed = [r for r in results if r not in elected and r not in noop]
    lines = []
    if elected:
        lines.append(f"Successfully completed leader election ({name}) for partitions "
                     f"{_tps(elected)}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {_tps(noop)}")
    for r in failed:
        lines.append(f"Error completing leader election ({name}) for partition: "
                     f"{r['topic']}-{r['partition']}: {r['result']}: {r['message']}")
    if failed:
        lines.append(f"{len(failed)} replica(s) could not be elected")
    if not results:
        lines.append(f"No partition needed a {name.lower()} leader election.")
    return "\n".join(lines)
