"""The checker on synthetic histories: a clean one passes, each planted anomaly is caught."""

from __future__ import annotations

import copy

import pytest

from weir.verify.checker import KINDS, check


class H:
    """Builds a synthetic history in the recorder's format."""

    def __init__(self, workload: str = "produce-consume") -> None:
        self.ops: list[dict] = []
        self.t = 0.0
        self.ids = 0
        self.add("verify", "info", "config", {"workload": workload})

    def add(self, process, type_, f, value=None, op_id=None, dt=0.1):
        self.t += dt
        op = {"index": len(self.ops), "time": round(self.t, 3), "process": process,
              "type": type_, "f": f, "value": value}
        if op_id is not None:
            op["id"] = op_id
        self.ops.append(op)
        return op

    def invoke(self, process, f, value=None):
        self.ids += 1
        self.add(process, "invoke", f, value, self.ids)
        return self.ids

    def send(self, p, o, v, type_="ok"):
        i = self.invoke("writer", "send", {"partition": p, "value": v})
        self.add("writer", type_, "send", {"partition": p, "offset": o, "value": v}, i)

    def poll(self, process, records):
        i = self.invoke(process, "poll")
        self.add(process, "ok", "poll", {"records": [list(r) for r in records]}, i)

    def assign(self, process, partitions):
        self.add(process, "ok", "assign", {"partitions": partitions})

    def commit(self, process, offsets, type_="ok"):
        i = self.invoke(process, "commit", {"offsets": offsets})
        self.add(process, type_, "commit", {"offsets": offsets}, i)

    def final(self, records, hws):
        i = self.invoke("final", "final")
        self.assign("final", {p: 0 for p in hws})
        self.poll("final", records)
        self.add("final", "ok", "final", {"partitions": {
            p: {"hw": hw, "read_to": hw, "complete": True} for p, hw in hws.items()}}, i)

    def replicas(self, first_diff=None):
        i = self.invoke("checker", "replicas")
        self.add("checker", "ok", "replicas", {"partitions": [{
            "partition": 0, "hw": 3, "first_diff": first_diff, "replicas": {
                "1": {"hw": 3, "batches": 3, "digest": "aa"},
                "2": {"hw": 3, "batches": 3, "digest": "aa" if first_diff is None else "bb"}}}]},
                 i)


def clean(workload: str = "produce-consume") -> H:
    """Two partitions, a nemesis window, reads during and after the run, group commits."""
    h = H(workload)
    h.assign("reader", {0: 0, 1: 0})
    h.send(0, 0, "v-0")
    h.send(1, 0, "v-1")
    h.poll("reader", [(0, 0, "v-0"), (1, 0, "v-1")])
    h.add("nemesis", "info", "start", {"window": 1, "fault": "kill", "target": 2})
    h.send(0, 1, "v-2")
    h.send(1, 1, "v-3", type_="info")  # indeterminate, yet it was written
    h.add("nemesis", "info", "stop", {"window": 1}, dt=2.0)
    h.send(0, 2, "v-4")
    h.poll("reader", [(0, 1, "v-2"), (1, 1, "v-3"), (0, 2, "v-4")])
    if workload == "groups":
        h.add("group-0", "ok", "assign", {"partitions": {0: None, 1: None}})
        h.poll("group-0", [(0, 0, "v-0"), (0, 1, "v-2"), (1, 0, "v-1")])
        h.commit("group-0", {0: 2, 1: 1})
        h.poll("group-0", [(0, 2, "v-4"), (1, 1, "v-3")])
        h.commit("group-0", {0: 3, 1: 2})
        i = h.invoke("checker", "committed")
        h.add("checker", "ok", "committed", {"offsets": {0: 3, 1: 2}}, i)
    h.final([(0, 0, "v-0"), (0, 1, "v-2"), (0, 2, "v-4"), (1, 0, "v-1"), (1, 1, "v-3")],
            {0: 3, 1: 2})
    h.replicas()
    return h


@pytest.mark.parametrize("workload", ["produce-consume", "groups"])
def test_clean_history_is_valid(workload):
    result = check(clean(workload).ops)
    assert result.valid, result.anomalies
    assert set(result.counts) == set(KINDS)
    assert result.stats["acks"] == 4 and result.stats["send_info"] == 1
    [window] = result.windows
    assert window.fault == "kill" and window.end is not None
    assert window.unavailable_s == pytest.approx(0.2, abs=1e-6)  # v-2's invoke -> its ok


def only(result, kind):
    bad = {k: n for k, n in result.counts.items() if n}
    assert set(bad) == {kind}, (bad, result.anomalies)
    return [a for a in result.anomalies if a.kind == kind]


def test_lost_write():
    h = clean()  # v-9 acknowledged at 1/2 before the final read, which does not have it
    final_at = next(i for i, op in enumerate(h.ops) if op["process"] == "final")
    inv = {"index": 0, "time": 5.0, "process": "writer", "type": "invoke", "f": "send",
           "id": 900, "value": {"partition": 1, "value": "v-9"}}
    ok = {"index": 0, "time": 5.1, "process": "writer", "type": "ok", "f": "send", "id": 900,
          "value": {"partition": 1, "offset": 2, "value": "v-9"}}
    h.ops[final_at:final_at] = [inv, ok]
    for i, op in enumerate(h.ops):
        op["index"] = i
    [a] = only(check(h.ops), "lost-write")
    assert a.value == "v-9" and a.partition == 1


def test_duplicate():
    h = clean()
    final = next(op for op in h.ops if op["process"] == "final" and op["f"] == "poll"
                 and op["type"] == "ok")
    final["value"]["records"].append([0, 3, "v-2"])  # the retry stored v-2 twice
    [a] = only(check(h.ops), "duplicate")
    assert a.value == "v-2"


def test_inconsistent_offset():
    h = clean()
    h.poll("late-reader", [(0, 1, "v-4")])  # offset 0/1 holds v-2 according to everyone else
    result = check(h.ops)
    kinds = {k for k, n in result.counts.items() if n}
    assert "inconsistent-offset" in kinds
    [a] = [a for a in result.anomalies if a.kind == "inconsistent-offset"]
    assert (a.partition, a.offset) == (0, 1)


def test_nonmonotonic_poll():
    h = clean()
    h.poll("reader", [(0, 1, "v-2")])  # the reader already read up to 0/2
    [a] = only(check(h.ops), "nonmonotonic-poll")
    assert (a.partition, a.offset) == (0, 1)


def test_reassign_starts_a_new_session():
    h = clean()
    h.assign("reader", {0: 1})
    h.poll("reader", [(0, 1, "v-2")])
    assert check(h.ops).valid


def test_skipped_offset():
    h = H()
    h.assign("reader", {0: 0})
    for o in range(3):
        h.send(0, o, f"v-{o}")
    h.poll("reader", [(0, 0, "v-0"), (0, 2, "v-2")])  # 0/1 exists (acked) but was skipped
    h.final([(0, 0, "v-0"), (0, 1, "v-1"), (0, 2, "v-2")], {0: 3})
    [a] = only(check(h.ops), "skipped-offset")
    assert a.offset == 1


def test_skip_from_the_assigned_start():
    h = H()
    h.assign("reader", {0: 0})
    h.send(0, 0, "v-0")
    h.send(0, 1, "v-1")
    h.poll("reader", [(0, 1, "v-1")])
    h.final([(0, 0, "v-0"), (0, 1, "v-1")], {0: 2})
    only(check(h.ops), "skipped-offset")


def test_phantom_read():
    h = clean()
    h.poll("other", [(1, 5, "never-sent")])
    only(check(h.ops), "phantom-read")


def test_ack_without_offset():
    h = clean()
    i = h.invoke("writer", "send", {"partition": 0, "value": "v-7"})
    h.add("writer", "ok", "send", {"partition": 0, "offset": -1, "value": "v-7"}, i)
    result = check(h.ops)  # acknowledged after the final read, so also lost
    assert {k for k, n in result.counts.items() if n} == {"ack-without-offset", "lost-write"}
    [a] = [a for a in result.anomalies if a.kind == "ack-without-offset"]
    assert a.value == "v-7"


def test_ack_without_offset_of_a_value_stored_once_is_librdkafkas_implicit_ack():
    """librdkafka reports an idempotent producer's earlier messages delivered without an
    offset once a later batch is acknowledged (rd_kafka_dr_implicit_ack): no anomaly when
    the final read shows the value stored exactly once, an anomaly when it shows it twice."""
    def history(stored_twice: bool) -> H:
        h = H()
        h.assign("reader", {0: 0})
        i = h.invoke("writer", "send", {"partition": 0, "value": "v-0"})
        h.add("writer", "ok", "send", {"partition": 0, "offset": None, "value": "v-0"}, i)
        h.send(0, 1, "v-1")
        records = [(0, 0, "v-0"), (0, 1, "v-1")] + ([(0, 2, "v-0")] if stored_twice else [])
        h.final(records, {0: len(records)})
        h.replicas()
        return h

    result = check(history(stored_twice=False).ops)
    assert result.valid, result.anomalies
    assert result.stats["acks_without_offset_stored_once"] == 1
    result = check(history(stored_twice=True).ops)
    assert {k for k, n in result.counts.items() if n} == {"ack-without-offset", "duplicate"}


def test_commit_backwards():
    h = clean("groups")
    h.commit("group-1", {0: 1})  # after 0 -> 3 completed
    [a] = only(check(h.ops), "commit-backwards")
    assert (a.partition, a.offset) == (0, 1)


def test_concurrent_commits_are_not_ordered():
    h = clean("groups")
    a = h.invoke("group-1", "commit", {"offsets": {1: 2}})
    h.commit("group-2", {1: 2})
    h.add("group-1", "ok", "commit", {"offsets": {1: 2}}, a)
    assert check(h.ops).valid


def test_failed_commit_does_not_count():
    h = clean("groups")
    h.commit("group-1", {0: 1}, type_="fail")
    assert check(h.ops).valid


def test_committed_read_backwards():
    h = clean("groups")
    i = h.invoke("checker", "committed")
    h.add("checker", "ok", "committed", {"offsets": {0: 2}}, i)
    only(check(h.ops), "commit-backwards")


def test_group_unconsumed():
    h = clean("groups")
    group_poll = next(op for op in h.ops if op["process"] == "group-0" and op["f"] == "poll"
                  and op["type"] == "ok")
    group_poll["value"]["records"] = [[0, 0, "v-0"], [0, 1, "v-2"]]  # v-1 (1/0) never did
    [a] = only(check(h.ops), "group-unconsumed")
    assert a.value == "v-1"


def test_incomplete_final_read():
    h = clean()
    final = next(op for op in h.ops if op["f"] == "final" and op["type"] == "ok")
    final["value"]["partitions"][1] = {"hw": 2, "read_to": 1, "complete": False}
    only(check(h.ops), "incomplete-final-read")


def test_replica_divergence():
    h = clean()
    h.ops = [op for op in h.ops if op["f"] != "replicas"]
    h.replicas(first_diff=1)
    [a] = only(check(h.ops), "replica-divergence")
    assert a.offset == 1


def test_unavailability_never_acked():
    h = clean()
    h.add("nemesis", "info", "start", {"window": 2, "fault": "partition", "target": 1})
    h.send(0, None, "v-8", type_="info")
    h.add("nemesis", "info", "stop", {"window": 2})
    windows = check(h.ops).windows
    assert [w.unavailable_s is None for w in windows] == [False, True]


def test_checker_does_not_mutate_history():
    ops = clean("groups").ops
    before = copy.deepcopy(ops)
    check(ops)
    assert ops == before
