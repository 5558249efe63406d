"""Every benchmark by tier, with what it measures and the arguments of a quick run.

Tiers, cheapest first:

* ``inprocess``: the broker's own code in this process (temporary directories, no sockets
  to a broker, no ZooKeeper); seconds to a few minutes.
* ``cluster``: a real ZooKeeper and broker processes on loopback (``LocalCluster``), driven
  by confluent-kafka; minutes to tens of minutes.
* ``spark``: local Spark (``local[2]``) against a topic or an in-memory floor source.
* ``ab``: two revisions (or two settings) measured in interleaved rounds in one run, since on
  a shared machine only figures taken side by side compare.
* ``diagnostics``: tools run around a broker (a profile, an event-loop stall watchdog).

Modules that only serve others (``floor_server``, ``page_cache``, ``controller_timeline``,
``spark_floor``) are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

TIERS = ("inprocess", "cluster", "spark", "ab", "diagnostics")


@dataclass(frozen=True)
class Benchmark:
    name: str  # the module bench/<name>.py
    tier: str
    summary: str
    quick: tuple[str, ...] = ()  # arguments of a short run (``run NAME --quick``)

    @property
    def module(self) -> str:
        return f"bench.{self.name}"


_ALL = (
    # -- in process ---------------------------------------------------------------------------
    Benchmark("produce_path", "inprocess",
              "Produce v9 through decode, handler and append: CPU µs and Python calls per request",
              ("--requests", "300", "--rounds", "2")),
    Benchmark("idle_fetch", "inprocess",
              "leader CPU and Python calls per partition of an idle follower Fetch (v13, v12)",
              ("--partitions", "300", "--fetches", "5")),
    Benchmark("fetch_purgatory", "inprocess",
              "leader cost of idle follower long polls and of an append seen by a parked fetch",
              ("--partitions", "300", "--cycles", "5")),
    Benchmark("decode_guard", "inprocess",
              "cost of the structural guard on the hot request decoders (guarded ÷ kio alone)",
              ("--iterations", "2000")),
    Benchmark("controller_encoding", "inprocess",
              "controller request encoding at N partitions: per request or shared",
              ("--partitions", "1000", "--rounds", "2")),
    Benchmark("broker_apply", "inprocess",
              "a broker applying LeaderAndIsr and UpdateMetadata of N partitions: CPU per step",
              ("--partitions", "1000", "--rounds", "2")),
    Benchmark("controller_sim", "inprocess",
              "controller CPU at scale in the deterministic simulation (failover, shutdown)",
              ("--partitions", "3000", "--runs", "1")),
    Benchmark("log_load", "inprocess",
              "broker start-up CPU of loading N idle logs, cyclic GC paused or not",
              ("--logs", "500", "--pairs", "1")),
    Benchmark("checkpoint_stall", "inprocess",
              "event-loop share of a replication-offset checkpoint at 1 to 10,000 partitions",
              ("--partitions", "1,1000", "--repeat", "3")),
    Benchmark("deferred_writes", "inprocess",
              "draining deferred leader-epoch checkpoints: per-file fsync against one batch",
              ("--sizes", "300", "--rounds", "1")),
    Benchmark("direct_send", "inprocess",
              "handing a Fetch response's header, records and tail to a loopback socket",
              ("--rounds", "300")),
    Benchmark("gil_convoy", "inprocess",
              "a helper thread's short system calls beside busy Python, by switch interval",
              ("--seconds", "0.5", "--rounds", "1")),
    # -- cluster ------------------------------------------------------------------------------
    Benchmark("compaction", "cluster",
              "cleaner throughput against a floor (in process), produce latency while it runs",
              ("--quick",)),
    Benchmark("produce_consume", "cluster",
              "produce and consume throughput of one broker against the floor server",
              ("--quick",)),
    Benchmark("tables_latency", "cluster",
              "produce latency p50/p99/p99.9 with a topic table on and off; loop lag, worker CPU",
              ("--seconds", "10", "--rounds", "1")),
    Benchmark("shutdown_10k", "cluster",
              "controlled shutdown at 10,000 partitions RF 3: exit, new leaders in Metadata, "
              "broker CPU per 1,000 partitions moved", ("--runs", "1")),
    Benchmark("replication", "cluster",
              "RF 3 ÷ RF 1 acks=all throughput, latency, failover; broker CPU seconds",
              ()),
    Benchmark("replication_floor", "cluster",
              "RF 3 ÷ RF 1 of Weir against the same ratio of the floor server",
              ()),
    Benchmark("latency", "cluster",
              "produce and end-to-end latency percentiles at fixed rates, RF 3",
              ("--quick",)),
    Benchmark("control_plane", "cluster",
              "10,000 partitions on 3 brokers: controlled shutdown, SIGKILL, controller failover",
              ("--partitions", "3000")),
    Benchmark("controlled_shutdown", "cluster",
              "seconds from SIGTERM to a broker's exit, real and controller-only",
              ("--partitions", "1000", "--runs", "1", "--controller-runs", "1")),
    Benchmark("controller", "cluster",
              "leader and controller failover at scale: real ZooKeeper, stand-in brokers",
              ("--partitions", "1000", "--runs", "1")),
    Benchmark("groups", "cluster",
              "consumer-group rebalance time and offset-commit rate on one broker",
              ("--quick",)),
    Benchmark("idle_cluster", "cluster",
              "each broker's CPU of an idle cluster with thousands of partitions",
              ("--partitions", "1000", "--seconds", "10")),
    Benchmark("zk_write_lag", "cluster",
              "event-loop lag while the controller writes 6,667 partition states to ZooKeeper"),
    # -- Spark --------------------------------------------------------------------------------
    Benchmark("spark_count", "spark",
              "Spark batch count over a topic against the same rows as Parquet",
              ("--records", "100000")),
    Benchmark("spark_stream", "spark",
              "Structured Streaming: AvailableNow throughput and end-to-end latency",
              ("--records", "100000", "--runs", "1", "--seconds", "10")),
    Benchmark("spark_cost", "spark",
              "Spark CPU per query to take rows from a Python data source, by variant",
              ("--rows", "100000", "--runs", "1")),
    Benchmark("spark_first_query", "spark",
              "a Spark session's first query over a topic against its first range(10).count()",
              ("--sessions", "1")),
    Benchmark("spark_history_scan", "spark",
              "a full scan of a topic's history through its Iceberg table against Parquet",
              ("--records", "100000", "--runs", "1")),
    # -- A/B ----------------------------------------------------------------------------------
    Benchmark("ab_revisions", "ab",
              "two revisions' RF 3 acks=all throughput and broker CPU, interleaved (--base REV)"),
    Benchmark("produce_cpu", "ab",
              "broker CPU seconds per MB produced: working tree, a revision, the floor"),
    Benchmark("consume_cpu", "ab",
              "broker CPU seconds per MB consumed: working tree, a revision, the floor"),
    Benchmark("fetch_stalls", "ab",
              "event-loop stalls of a broker serving a consumer: working tree against a revision"),
    Benchmark("segment_close", "ab",
              "first close of a segment file after appends: this tree against a revision",
              ("--mib", "8", "--rounds", "1")),
    Benchmark("event_loop", "ab",
              "brokers on asyncio's event loop against uvloop, interleaved"),
    Benchmark("spark_first_query_ab", "ab",
              "a Spark session's first query: this tree's weir/spark against a revision's"),
    # -- diagnostics --------------------------------------------------------------------------
    Benchmark("profile_broker", "diagnostics",
              "run a broker under cProfile and write the profile when it exits"),
    Benchmark("stall_broker", "diagnostics",
              "run a broker with an event-loop stall watchdog (WEIR_STALL_MS, WEIR_STALL_LOG)"),
)

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _ALL}


def by_tier(tier: str) -> list[Benchmark]:
    return [b for b in _ALL if b.tier == tier]
