"""The log dirs' ``.lock`` on real broker processes (Kafka's ``LogManager.lockLogDirs``): a
second process given a running broker's ``server.properties`` is refused before it reads or
writes anything, and the running broker's next start after a crash still recovers its logs
(no ``.kafka_cleanshutdown`` left behind by the refused process)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from weir.ops.cluster import LocalCluster
from weir.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from weir.storage.dir_lock import LOCK_FILE, is_locked

pytestmark = [pytest.mark.integration]


# Files the live broker itself writes in the background (checkpoints, the storage thread's
# partition.metadata and their temporary files): not part of the comparison.
_BACKGROUND = ("checkpoint", "checkpoint.tmp", "partition.metadata", "partition.metadata.tmp")


def _snapshot(log_dir) -> dict[str, tuple[int, int]]:
    """Every file under the dir with its size and modification time (ns)."""
    return {str(p.relative_to(log_dir)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(log_dir.rglob("*"))
            if p.is_file() and not p.name.endswith(_BACKGROUND)}


def test_a_second_broker_process_on_live_dirs_is_refused(tmp_path):
    cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0)
    cluster.start(timeout_s=90)
    try:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(20):
            producer.produce("locked", value=b"v%d" % i)
        assert producer.flush(30) == 0
        log_dir = cluster.broker_log_dirs(1)[0]
        assert (log_dir / LOCK_FILE).exists() and is_locked(log_dir)
        before = _snapshot(log_dir)

        second = subprocess.run(
            [sys.executable, "-m", "weir", "broker", "start",
             "--config", str(cluster.config_path(1))],
            check=False, capture_output=True, text=True, timeout=60)
        assert second.returncode != 0
        errors = [line for line in second.stderr.splitlines() if " ERROR " in line]
        assert len(errors) == 1, second.stderr
        assert (f"Failed to acquire lock on file .lock in {log_dir}. A Kafka instance in "
                "another process or thread is using this directory.") in errors[0]
        assert "Traceback" not in second.stderr
        # Nothing read into a second process' state, nothing written: same files, same
        # sizes, same times, and no clean-shutdown marker.
        assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        assert _snapshot(log_dir) == before

        # The owner crashes: its next start must recover (no marker from the refused one).
        cluster.kill_broker(1, signal.SIGKILL)
        assert not is_locked(log_dir)  # the kernel dropped the dead process' lock
        cluster.start_broker(1)
        cluster.wait_for_brokers([1], timeout_s=60)
        this_start = cluster.log_path(1).read_text().rsplit("=== weir: starting broker", 1)[1]
        assert f"loaded {log_dir} (clean shutdown: False)" in this_start
    finally:
        cluster.stop()
