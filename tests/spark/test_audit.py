"""``weir audit`` on a two-broker cluster: healthy replicas, then followers corrupted on
purpose (a byte of one batch flipped in its segment file; the tail of a segment cut off
below the high watermark)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.spark.conftest import wait_until
from tests.spark.helpers import produce
from weir.audit.job import local_cluster_dirs, plan
from weir.audit.replicas import (
    BatchSummary,
    ReplicaLog,
    compare,
    partition_dir,
    read_replica,
)
from weir.cli.main import main
from weir.ops.cluster import LocalCluster

pytestmark = pytest.mark.integration

TOPIC = "audited"


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    """Two brokers, a topic with 2 partitions and 2 replicas, 400 records on each."""
    cluster = LocalCluster(tmp_path_factory.mktemp("weir-audit"), brokers=2, port_base=0)
    try:
        cluster.start(timeout_s=120)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(60)
        for i in range(4):  # several batches
            produce(cluster.bootstrap, TOPIC, [{"value": b"r%d-%d" % (i, j) + b"x" * 50,
                                                "partition": j % 2} for j in range(200)])
        _, dirs = local_cluster_dirs(cluster.data_dir)

        def in_sync() -> bool:
            return all(read_replica(b, dirs[b], TOPIC, p, 1 << 62).log_end == 400
                       for b in (1, 2) for p in (0, 1))

        wait_until(in_sync, 60, "both replicas to hold every record")
        yield cluster
    finally:
        cluster.stop()


def test_healthy_cluster_agrees(replicated, spark, tmp_path, capsys):
    report = tmp_path / "audit.json"
    code = main(["audit", "--data-dir", str(replicated.data_dir), "--topics", TOPIC,
                 "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = json.loads(report.read_text())["partitions"]
    assert sorted(r["partition"] for r in rows) == [0, 1]
    assert all(r["first_divergent_offset"] is None and r["batches_compared"] >= 4
               and r["high_watermark"] == 400 and not r["behind"] for r in rows)
    assert "audited 2 partitions" in out and "0 diverged" in out


def test_corrupted_follower_is_reported(replicated, spark, tmp_path, capsys):
    bootstrap, dirs = local_cluster_dirs(replicated.data_dir)
    task = next(t for t in plan(bootstrap, [TOPIC], dirs) if t["partition"] == 1)
    follower = next(b for b in task["replicas"] if b != task["leader"])
    replica = read_replica(follower, dirs[follower], TOPIC, 1, 1 << 62)
    victim = replica.batches[2]
    segment = min(partition_dir(dirs[follower][0], TOPIC, 1).glob("*.log"))
    data = bytearray(segment.read_bytes())
    pos = _batch_position(data, victim.base_offset)
    data[pos + 70] ^= 0x01  # inside the records: the stored CRC no longer matches
    segment.write_bytes(bytes(data))

    report = tmp_path / "audit.parquet"
    args = ["audit", "--bootstrap", bootstrap, "--topics", "audit.*", "--report", str(report)]
    for b, ds in dirs.items():
        args += ["--log-dir", f"{b}={ds[0]}"]
    code = main(args)
    out = capsys.readouterr().out
    assert code == 1, out
    rows = {r["partition"]: r for r in pq.read_table(report).to_pylist()}
    assert rows[0]["first_divergent_offset"] is None
    assert rows[1]["first_divergent_offset"] == victim.base_offset
    assert rows[1]["disagreeing"] == [follower]
    assert f"DIVERGED {TOPIC}-1 at offset {victim.base_offset}" in out


def test_truncated_in_sync_follower_is_reported(replicated, spark, tmp_path, capsys):
    """A follower still in the ISR whose segment lost its last batches below the HW."""
    bootstrap, dirs = local_cluster_dirs(replicated.data_dir)
    task = next(t for t in plan(bootstrap, [TOPIC], dirs) if t["partition"] == 0)
    follower = next(b for b in task["replicas"] if b != task["leader"])
    assert follower in task["isr"]
    replica = read_replica(follower, dirs[follower], TOPIC, 0, 1 << 62)
    cut = replica.batches[-2]
    segment = max(partition_dir(dirs[follower][0], TOPIC, 0).glob("*.log"))
    data = bytearray(segment.read_bytes())
    with segment.open("r+b") as f:
        f.truncate(_batch_position(data, cut.base_offset))

    report = tmp_path / "audit.json"
    code = main(["audit", "--data-dir", str(replicated.data_dir), "--topics", TOPIC,
                 "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 1, out
    rows = {r["partition"]: r for r in json.loads(report.read_text())["partitions"]}
    assert rows[0]["first_divergent_offset"] == cut.base_offset
    assert rows[0]["disagreeing"] == [follower]
    assert rows[0]["behind"] == {}
    assert f"ends at {cut.base_offset}, below the high watermark 400" in out


def _batch_position(data: bytearray, base_offset: int) -> int:
    pos = 0
    while pos < len(data):
        if int.from_bytes(data[pos:pos + 8], "big") == base_offset:
            return pos
        pos += int.from_bytes(data[pos + 8:pos + 12], "big") + 12
    raise AssertionError(f"no batch at {base_offset}")


def _s(base: int, last: int, epoch: int = 0, crc: int = 1, ok: bool = True) -> BatchSummary:
    return BatchSummary(base, last, epoch, crc, ok)


def test_compare_epochs_lagging_replicas_and_log_start():
    """The comparison alone: what diverges and what is only behind or trimmed."""
    a = ReplicaLog(1, [_s(0, 9), _s(10, 19), _s(20, 29, epoch=1)], 30)
    b = ReplicaLog(2, [_s(10, 19), _s(20, 29, epoch=2, crc=7)], 30)  # retention trimmed 0-9
    c = ReplicaLog(3, [_s(0, 9), _s(10, 19)], 20)  # out of the ISR: behind, not divergent
    report = compare("t", 0, 1, 30, {1: a, 2: b, 3: c})
    assert report.first_divergent_offset == 20 and report.disagreeing == [2]
    assert report.batches_compared == 1 and report.behind == {"3": 20}
    healthy = compare("t", 0, 1, 30, {1: a, 3: ReplicaLog(3, list(a.batches), 30)})
    assert not healthy.diverged and healthy.batches_compared == 3
    # above the high watermark nothing is compared
    assert not compare("t", 0, 1, 20, {1: a, 2: b}).diverged
    missing = compare("t", 0, 1, 30, {1: a, 2: ReplicaLog(2, problem="gone")})
    assert missing.problems == {"2": "gone"} and not missing.diverged


def test_compare_truncated_tail_of_an_isr_member():
    """Short of the HW is *behind* out of the ISR, lost committed records inside it."""
    a = ReplicaLog(1, [_s(0, 9), _s(10, 19), _s(20, 29)], 30)
    short = ReplicaLog(2, [_s(0, 9), _s(10, 19)], 20)
    lagging = compare("t", 0, 1, 30, {1: a, 2: short}, isr=[1])
    assert not lagging.diverged and lagging.behind == {"2": 20}
    lost = compare("t", 0, 1, 30, {1: a, 2: short}, isr=[1, 2])
    assert lost.first_divergent_offset == 20 and lost.disagreeing == [2]
    assert lost.behind == {} and "in the ISR but its log ends at 20" in lost.detail
    # an earlier differing batch stays the first divergence
    bad = ReplicaLog(2, [_s(0, 9), _s(10, 19, crc=5)], 20)
    both = compare("t", 0, 1, 30, {1: a, 2: bad}, isr=[1, 2])
    assert both.first_divergent_offset == 10 and both.disagreeing == [2]
    # the leader itself cut short is reported too (the HW came from the ISR's log ends)
    assert compare("t", 0, 1, 30, {1: short, 2: a}, isr=[1, 2]).disagreeing == [1]
