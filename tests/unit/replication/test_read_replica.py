from weir.replication.read_replica import ReplicaView, preferred_read_replica, rack_aware_enabled

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}
LEADER = ReplicaView(1, 10, 0)


def views(*specs: tuple[int, int, int]) -> list[ReplicaView]:
    return [ReplicaView(*s) for s in specs]


def test_rack_aware_selection():
    """RackAwareReplicaSelector: the leader if it is in the client's rack or none is."""
    candidates = views((2, 10, 0), (3, 10, 0))
    assert preferred_read_replica(LEADER, candidates, RACKS, "b") == 2
    assert preferred_read_replica(LEADER, candidates, RACKS, "a") == -1  # the leader
    assert preferred_read_replica(LEADER, views((3, 10, 0)), RACKS, "b") == -1  # 2 not a candidate
    assert preferred_read_replica(LEADER, candidates, RACKS, "") == -1
    assert preferred_read_replica(LEADER, candidates, RACKS, "z") == -1


def test_most_caught_up_replica_in_the_rack_wins():
    """RackAwareReplicaSelector / ReplicaView.comparator: the largest log end offset, then the
    most recently caught up, then the largest broker id."""
    assert preferred_read_replica(LEADER, views((2, 8, 0), (4, 9, 50)), RACKS, "b") == 4
    assert preferred_read_replica(LEADER, views((2, 9, 10), (4, 9, 50)), RACKS, "b") == 2
    assert preferred_read_replica(LEADER, views((2, 9, 10), (4, 9, 10)), RACKS, "b") == 4


def test_selector_class_names():
    assert rack_aware_enabled("org.apache.kafka.common.replica.RackAwareReplicaSelector")
    assert not rack_aware_enabled(None)
    assert not rack_aware_enabled("org.apache.kafka.common.replica.LeaderSelector")
