"""weir up's checks before anything is written: options, --set keys, a data dir in use."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

import pytest

from weir.cli import main as cli
from weir.cli.up import check_up_args, data_dir_in_use, unknown_key_warnings


def test_unknown_set_key_names_the_closest_known_key() -> None:
    (line,) = unknown_key_warnings({"log.retention.hour": "1", "num.partitions": "3"})
    assert "'log.retention.hour'" in line and "did you mean 'log.retention.hours'?" in line
    assert unknown_key_warnings({"num.partitions": "3"}) == []
    (far,) = unknown_key_warnings({"zzz": "1"})
    assert "did you mean" not in far


@pytest.mark.parametrize(("argv", "message"), [
    (["--brokers", "0"], "--brokers must be 1 or more (got 0)"),
    (["--port-base", "70000"], "--port-base 70000"),
    (["--port-base", "65535", "--brokers", "2"], "must lie in 1..65535"),
    (["--port-base", "-1"], "--port-base -1"),
    (["--console-port", "70000"], "--console-port 70000"),
    (["--set", "num.partitions=0"], "num.partitions"),
])
def test_bad_up_options_are_one_line_errors(tmp_path, capsys, argv, message) -> None:
    assert cli.main(["up", "--data-dir", str(tmp_path / "d"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("weir: ")
    assert not (tmp_path / "d").exists()


def test_valid_options_pass(tmp_path) -> None:
    args = cli.build_parser().parse_args(["up", "--data-dir", str(tmp_path), "--port-base",
                                          "65533"])
    assert check_up_args(args, {}) is None


def test_a_log_dir_locked_by_a_broker_is_refused(tmp_path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / ".lock").touch()
    assert data_dir_in_use(log_dir) is None  # the file alone: no broker holds it
    fd = os.open(log_dir / ".lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running broker does
        for inside in (log_dir, log_dir / "sub"):
            reason = data_dir_in_use(inside)
            assert reason and "is a log dir of a running broker" in reason
    finally:
        os.close(fd)
    assert data_dir_in_use(log_dir) is None


def test_a_dir_inside_a_running_cluster_is_refused(tmp_path) -> None:
    cluster = tmp_path / "cluster"
    (cluster / "broker-1").mkdir(parents=True)
    zk = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "zookeeper"])
    try:
        (cluster / "cluster.json").write_text(json.dumps({"zookeeper_pid": zk.pid,
                                                          "brokers": []}))
        reason = data_dir_in_use(cluster / "broker-1")
        assert reason and f"inside the running cluster of {cluster}" in reason
        assert data_dir_in_use(cluster) is None  # its own dir: weir up attaches
    finally:
        zk.kill()
        zk.wait()
    assert data_dir_in_use(cluster / "broker-1") is None  # a stopped cluster's dir is free
