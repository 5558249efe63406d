"""``weir up``, ``weir down`` and ``weir status`` on a local cluster (``weir.ops.cluster``).

``weir up`` checks what it can before writing anything (the data dir is not inside a running
cluster or a running broker's log dir, the ports are free, the ``--set`` keys are known),
says whether it starts a cluster or attaches to one already running, and which processes it
(re)started.  Ctrl-C stops a cluster this ``weir up`` started; one it attached to keeps
running (``weir down`` stops it).
"""

from __future__ import annotations

import argparse
import difflib
import signal
import sys
import time
from pathlib import Path
from typing import Any

from weir.cli import DEFAULT_DATA_DIR, no_cluster_in
from weir.cli.broker_start import EXIT_CONFIG
from weir.config import BROKER_CONFIG_DEFS, BrokerConfig, ConfigError
from weir.ops import procs
from weir.ops.cluster import ClusterError, LocalCluster, read_cluster_file
from weir.ops.zkview import close_zk, collect_snapshot, open_zk, render_snapshot
from weir.storage.dir_lock import LOCK_FILE, is_locked

# What Kafka's own config/server.properties sets for development over the broker defaults, in
# a new broker's server.properties (kept there, editable; --set wins): a consumer group's
# first rebalance waits group.initial.rebalance.delay.ms (3 s by default) for more members,
# which made `weir consume --timeout-ms 2000` give up before its first record.
DEV_BROKER_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}

# -- checks before anything is written -------------------------------------------------------


def _cluster_running(state: dict[str, Any]) -> bool:
    if procs.is_zookeeper_process(int(state.get("zookeeper_pid") or 0)):
        return True
    return any(procs.is_broker_process(int(b.get("pid") or 0), b.get("config"))
               for b in state.get("brokers", []))


def data_dir_in_use(data_dir: Path) -> str | None:
    """Why ``data_dir`` cannot hold a cluster of its own, or None.

    It must not lie inside the directory of a running local cluster (e.g. its
    ``broker-1/``), nor be or lie inside a log dir locked by a running broker."""
    data_dir = data_dir.resolve()
    for parent in data_dir.parents:
        try:
            state = read_cluster_file(parent)
        except ClusterError:
            state = None
        if state is not None and _cluster_running(state):
            return (f"{data_dir} lies inside the running cluster of {parent}; give weir up a "
                    f"directory of its own (or stop that one: weir down --data-dir {parent})")
    for directory in (data_dir, *data_dir.parents):
        if is_locked(directory):
            return (f"{directory} is a log dir of a running broker ({directory / LOCK_FILE} is "
                    f"locked); give weir up a directory of its own")
    return None


def unknown_key_warnings(overrides: dict[str, str]) -> list[str]:
    """One line per ``--set`` key no broker knows, naming the closest known key."""
    known = list(BROKER_CONFIG_DEFS)
    lines = []
    for key in BrokerConfig({"broker.id": "0", "zookeeper.connect": "x", **overrides},
                            {}, {}).unknown:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        lines.append(f"weir: warning: unknown broker config key {key!r} (--set), ignored "
                     f"by the brokers{hint}")
    return lines


def check_up_args(args: argparse.Namespace, overrides: dict[str, str]) -> str | None:
    """A one-line error for options ``weir up`` refuses, or None."""
    if args.brokers is not None and args.brokers < 1:
        return f"--brokers must be 1 or more (got {args.brokers})"
    if args.first_broker_id is not None and args.first_broker_id < 0:
        return "--first-broker-id must be 0 or more"
    if args.log_dirs < 1:
        return "--log-dirs must be 1 or more"
    port_base, count = args.port_base, args.brokers or 1
    if port_base is not None and port_base != 0 and not 1 <= port_base <= 65536 - count:
        return (f"--port-base {port_base}: brokers listen on port-base .. port-base + "
                f"{count - 1}, which must lie in 1..65535 (0: free ports)")
    if not 0 <= args.console_port <= 65535:
        return f"--console-port {args.console_port}: must lie in 0..65535"
    try:  # a bad value fails before starting anything
        BrokerConfig({"broker.id": "0", "zookeeper.connect": "x", **overrides}, {}, {})
    except ConfigError as exc:
        return str(exc)
    return data_dir_in_use(Path(args.data_dir))


# -- commands -----------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    overrides = dict(args.overrides)
    error = check_up_args(args, overrides)
    if error is not None:
        print(f"weir: {error}", file=sys.stderr)
        return EXIT_CONFIG
    for line in unknown_key_warnings(overrides):
        print(line, file=sys.stderr)
    port_base = 9092 if args.port_base is None else args.port_base
    brokers = args.brokers or len(list(Path(args.data_dir).glob("broker-*/server.properties")))
    cluster = LocalCluster(Path(args.data_dir), brokers or 3, port_base, overrides,
                           first_broker_id=args.first_broker_id, log_dirs=args.log_dirs)
    cluster.port_base_explicit = args.port_base is not None
    cluster.new_broker_defaults = dict(DEV_BROKER_DEFAULTS)
    console = args.console or cluster.console_port > 0  # a console once: supervised since
    # Every broker serves /metrics from its first start, so a console added later (and
    # weir reassign --verify's progress) can read it without a broker restart.
    cluster.serve_metrics = True
    from weir.ops.secure import SecureCluster

    secure = SecureCluster(cluster.data_dir)
    if args.secure or (secure.dir / "users.json").exists():  # a restart stays secured
        cluster.secure = secure
    if cluster.running():
        print(f"Attaching to the cluster already running in {cluster.data_dir}"
              + ("." if args.detach else ": Ctrl-C detaches and leaves it running; weir down "
                 "stops it."), flush=True)
    else:
        print(f"Starting local cluster in {cluster.data_dir} ...", flush=True)
    added: list[str] = []
    try:
        cluster.start(timeout_s=args.timeout)
        console_was_up = cluster.console_alive()
        console_ran_before = bool(cluster.console_port)  # its port is kept in cluster.json
        if console:
            url = cluster.start_console(args.console_port)
            if not console_was_up and (console_ran_before or not cluster.attached):
                cluster.started_now.append("the console")
            elif not console_was_up:  # asked for the first time on a running cluster
                added.append("the console")
            print(f"Console: {url}", flush=True)
    except KeyboardInterrupt:
        _stop_unless_attached(cluster)
        return 130
    except (ClusterError, TimeoutError, OSError, RuntimeError) as exc:
        print(f"weir: cluster did not start: {exc}", file=sys.stderr)
        _stop_unless_attached(cluster)
        return 1
    if args.brokers is not None and args.brokers < len(cluster.broker_ids):
        cluster.notes.append(
            f"--brokers {args.brokers}: {cluster.data_dir} has {len(cluster.broker_ids)} "
            f"brokers ({', '.join(map(str, cluster.broker_ids))}); weir up runs every broker "
            f"of its data dir and removes none (weir broker stop --id N stops one)")
    try:
        return _report_and_serve(args, cluster, added)
    except BrokenPipeError:  # `weir up | head`: the reader of its output went away
        if not args.detach:  # the foreground cluster lives as long as this weir up
            if cluster.attached:
                cluster.disconnect()
            else:
                cluster.stop()
        raise


def _report_and_serve(args: argparse.Namespace, cluster: LocalCluster, added: list[str]
                      ) -> int:
    for note in cluster.notes:
        print(f"Note: {note}", flush=True)
    _report_started(cluster, added)
    print(f"ZooKeeper: {cluster.zookeeper_connect}")
    print(f"Bootstrap servers: {cluster.bootstrap}", flush=True)
    if cluster.secure is not None:  # the file holds the admin password: it is not printed
        print(f"Client settings (user admin; the password is in the file, mode 0600): "
              f"{cluster.secure.client_properties_path}", flush=True)
    if args.detach:
        return 0
    try:
        live_view(cluster)
    finally:
        if cluster.attached:
            cluster.disconnect()
            print(f"\nDetached; the cluster keeps running (weir down --data-dir "
                  f"{cluster.data_dir} stops it).", flush=True)
        else:
            print("\nStopping the cluster ...", flush=True)
            cluster.stop()
            print("Stopped.")
    return 0


def _report_started(cluster: LocalCluster, added_here: list[str]) -> None:
    """What this ``weir up`` launched: all of it for a new cluster; on a running one, what it
    added (a larger --brokers, a first --console) apart from what it restarted."""
    if cluster.attached:
        brokers = [f"broker {i}" for i in cluster.added_now]
        added = brokers + added_here
        restarted = [p for p in cluster.started_now if p not in brokers]
        if added:  # a larger --brokers on a running cluster: new brokers, not restarts
            print(f"Added: {', '.join(added)}.", flush=True)
        if restarted or not added:
            print(f"Restarted: {', '.join(restarted)}." if restarted
                  else "Every process was running: nothing restarted.", flush=True)
    else:
        print(f"Started: {', '.join(cluster.started_now)}.", flush=True)


def _stop_unless_attached(cluster: LocalCluster) -> None:
    """A failed or interrupted start stops what it started, never a cluster it found."""
    if cluster.attached:
        print(f"weir: the cluster in {cluster.data_dir} was already running: left running",
              file=sys.stderr)
    else:
        cluster.stop()


def live_view(cluster: LocalCluster, interval_s: float = 1.0) -> None:
    """Redraw the status every ``interval_s`` until Ctrl-C (or SIGTERM)."""
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    tty = sys.stdout.isatty()
    last = None
    leave = "detaches" if cluster.attached else "stops the cluster"
    try:
        while True:
            text = _status_text(cluster)
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J" + text + f"\n\n(Ctrl-C {leave})\n")
                sys.stdout.flush()
            elif text != last:
                print(f"--- {time.strftime('%H:%M:%S')}\n{text}", flush=True)
            last = text
            time.sleep(interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def console_line(cluster: LocalCluster) -> str | None:
    """The console's line of the status view, or None for a cluster without one."""
    cluster.forget_dead_console()
    if cluster.console_url:
        return f"console: {cluster.console_url} (pid {cluster.console_pid})"
    if cluster.console_port:
        return (f"console: not running (port {cluster.console_port}; weir up restarts it)")
    return None


def _status_text(cluster: LocalCluster) -> str:
    processes = {i: cluster.broker_pid(i) for i in cluster.broker_ids}
    header = f"weir cluster {cluster.data_dir}\nbootstrap: {cluster.bootstrap}\n"
    console = console_line(cluster)
    if console:
        header += console + "\n"
    try:
        snap = collect_snapshot(cluster.zk())
    except Exception as exc:  # noqa: BLE001 - keep the view alive while ZooKeeper is away
        return header + f"(ZooKeeper unavailable: {exc})"
    return header + "\n" + render_snapshot(snap, processes, partitions=False)


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    if read_cluster_file(data_dir) is None:
        print(f"weir: no cluster recorded in {data_dir.resolve()}", file=sys.stderr)
        return 1
    cluster = LocalCluster(data_dir)
    was_running = cluster.running() or cluster.console_alive()
    cluster.stop(timeout_s=args.timeout)
    print("Stopped." if was_running
          else f"Nothing was running in {data_dir}: the cluster was already stopped.")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from weir.ops.zkview import filter_snapshot, snapshot_json

    snap, processes, console = _status_snapshot(args)
    filtering = args.under_replicated_partitions or args.unavailable_partitions
    shown = filter_snapshot(snap, args.include_internal, args.under_replicated_partitions,
                            args.unavailable_partitions)
    if args.json:
        import json

        doc = snapshot_json(shown, processes)
        if console is not None:
            doc["console"] = console
        print(json.dumps(doc, indent=2))
    elif filtering:  # kafka-topics.sh --describe --under-replicated-partitions: rows only
        print(render_snapshot(shown, processes).split("\n\n", 2)[-1]
              if shown.partitions else "No partitions match.")
    else:
        text = render_snapshot(shown, processes)
        print(f"{console}\n\n{text}" if console else text)
    return 0


def _status_snapshot(args: argparse.Namespace) -> tuple[Any, dict[int, int | None] | None,
                                                         str | None]:
    """The cluster's snapshot, for a local cluster its broker pids and its console line."""
    from weir.cli.errors import CliError

    if args.bootstrap_server:
        from confluent_kafka import KafkaException

        from weir.cli.admin_common import admin_client, kafka_error_text
        from weir.ops.zkview import snapshot_from_metadata

        args.data_dir = args.data_dir or DEFAULT_DATA_DIR
        try:
            md = admin_client(args).list_topics(timeout=args.timeout)
        except KafkaException as exc:
            raise CliError(f"reading the cluster metadata: {kafka_error_text(exc)}") from None
        return snapshot_from_metadata(md), None, None
    processes = None
    console = None
    connect = args.zookeeper
    if connect is None:
        data_dir = Path(args.data_dir or DEFAULT_DATA_DIR)
        state = read_cluster_file(data_dir)
        if state is None:
            raise CliError(no_cluster_in(data_dir, "--zookeeper or --bootstrap-server"),
                           name="INVALID_ARGUMENT")
        if not procs.pid_alive(int(state.get("zookeeper_pid") or 0)):
            raise CliError(f"the cluster in {data_dir} is not running (ZooKeeper is down)",
                           name="NETWORK_EXCEPTION")
        cluster = LocalCluster(data_dir)
        connect = state["zookeeper"]
        processes = {i: cluster.broker_pid(i) for i in cluster.broker_ids}
        console = console_line(cluster)
    try:
        zk = open_zk(connect, timeout_s=args.timeout)
    except Exception as exc:  # noqa: BLE001 - report any connection failure plainly
        raise CliError(f"cannot reach ZooKeeper at {connect}: NETWORK_EXCEPTION: {exc}"
                       ) from None
    try:
        return collect_snapshot(zk), processes, console
    finally:
        close_zk(zk)
