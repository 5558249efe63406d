"""Consumer-group benchmarks on a one-broker Weir cluster.

1. **Rebalance time**: a group of N confluent-kafka consumers (N = 1, 5, 20; range assignor,
   ``heartbeat.interval.ms`` 500, ``session.timeout.ms`` 6000) is Stable; one more member
   subscribes.  Timed from that ``subscribe()`` until DescribeGroups shows the group Stable
   with N+1 members, each holding an assignment.  Existing members learn of the rebalance
   from their next heartbeat, so the heartbeat interval bounds the figure from below.
2. **Commit throughput**: C clients (C = 1, 8), each a confluent-kafka consumer in its own
   group with no subscription, commit one partition's offset synchronously in a loop for a
   few seconds; commits per second the coordinator sustains (each commit is one record
   appended to ``__consumer_offsets`` with acks=all).

    .venv/bin/python -m bench run groups [--quick] [--repeat 3]

Results: ``bench/results/groups.{md,json}`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import cluster as bench_cluster
from bench.harness import out_dir

RESULTS = out_dir()
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "10",
             "offsets.topic.replication.factor": "1", "auto.create.topics.enable": "false"}
PARTITIONS = 24


class Member(threading.Thread):
    """A subscribed consumer that keeps polling so rebalances are served."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range"})
        self.topic = topic
        self.stopping = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self.stopping.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()


def _stable(admin: AdminClient, group: str, members: int) -> bool:
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=5)[group].result(5)
    except Exception:  # noqa: BLE001 - not yet known to the coordinator
        return False
    return (str(desc.state).upper().endswith("STABLE") and len(desc.members) == members
            and all(m.assignment.topic_partitions for m in desc.members))


def _wait(predicate, timeout_s: float, interval_s: float = 0.01) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError("timed out")
        time.sleep(interval_s)
    return time.monotonic() - start


def rebalance_time(bootstrap: str, topic: str, n: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, topic) for _ in range(n)]
    try:
        for m in members:
            m.start()
        _wait(lambda: _stable(admin, group, n), 120)
        joiner = Member(bootstrap, group, topic)
        members.append(joiner)
        start = time.monotonic()
        joiner.start()
        _wait(lambda: _stable(admin, group, n + 1), 120)
        return time.monotonic() - start
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)


def commit_rate(bootstrap: str, topic: str, clients: int, seconds: float) -> float:
    counts = [0] * clients
    stop = threading.Event()

    def worker(i: int) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"commit-{uuid.uuid4().hex}"})
        offset = 0
        c.commit(offsets=[TopicPartition(topic, i % PARTITIONS, offset)], asynchronous=False)
        while not stop.is_set():
            offset += 1
            c.commit(offsets=[TopicPartition(topic, i % PARTITIONS, offset)],
                     asynchronous=False)
            counts[i] += 1
        c.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # warm-up: connections, coordinator lookups
    base = sum(counts)
    started = time.monotonic()
    time.sleep(seconds)
    done = sum(counts) - base
    elapsed = time.monotonic() - started
    stop.set()
    for t in threads:
        t.join(30)
    return done / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, short commit runs")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    commit_s = 2.0 if args.quick else 5.0
    out: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "host": f"{platform.node()} ({os.cpu_count()} CPUs, Python "
                         f"{platform.python_version()})",
                 "rebalance_s": {}, "commits_per_s": {}}
    with bench_cluster(None, 1, overrides=OVERRIDES) as cluster:
        bootstrap = cluster.bootstrap
        topic = "bench-groups"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        rebalance_time(bootstrap, topic, 1)  # warm-up: creates __consumer_offsets
        for n in (1, 5, 20):
            runs = [rebalance_time(bootstrap, topic, n) for _ in range(repeat)]
            out["rebalance_s"][str(n)] = runs
            print(f"N={n}: join → stable in {statistics.median(runs) * 1000:.0f} ms "
                  f"(runs {[round(r * 1000) for r in runs]})", flush=True)
        for clients in (1, 8):
            rate = commit_rate(bootstrap, topic, clients, commit_s)
            out["commits_per_s"][str(clients)] = rate
            print(f"{clients} client(s): {rate:.0f} commits/s", flush=True)
    _write(out)
    return 0


def _write(out: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"groups-{stamp}.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [f"# Consumer groups — {out['date']}", "", f"Host: {out['host']}", "",
             ("One broker, `__consumer_offsets` RF 1, confluent-kafka clients "
             "(see bench/groups.py)."), "",
             "## A member joins a group of N: time until the group is Stable again", "",
             "| N | median ms | runs (ms) |", "|---|---|---|"]
    for n, runs in out["rebalance_s"].items():
        lines.append(f"| {n} | {statistics.median(runs) * 1000:.0f} | "
                     f"{', '.join(str(round(r * 1000)) for r in runs)} |")
    lines += ["", "## Synchronous offset commits", "", "| clients | commits/s |", "|---|---|"]
    for c, rate in out["commits_per_s"].items():
        lines.append(f"| {c} | {rate:.0f} |")
    text = "\n".join(lines) + "\n"
    (RESULTS / f"groups-{stamp}.md").write_text(text)
    (RESULTS / "groups-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
