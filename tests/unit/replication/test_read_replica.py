from weir.replication.read_replica import preferred_read_replica, rack_aware_enabled


def test_rack_aware_selection():
    racks = {1: "a", 2: "b", 3: "c"}
    assert preferred_read_replica(1, [1, 2, 3], {1, 2, 3}, racks, "b") == 2
    assert preferred_read_replica(1, [1, 2, 3], {1, 2, 3}, racks, "a") == -1  # the leader
    assert preferred_read_replica(1, [1, 2, 3], {1, 3}, racks, "b") == -1  # 2 out of sync
    assert preferred_read_replica(1, [1, 2, 3], {1, 2, 3}, racks, "") == -1
    assert preferred_read_replica(1, [1, 2, 3], {1, 2, 3}, racks, "z") == -1


def test_selector_class_names():
    assert rack_aware_enabled("org.apache.kafka.common.replica.RackAwareReplicaSelector")
    assert not rack_aware_enabled(None)
    assert not rack_aware_enabled("org.apache.kafka.common.replica.LeaderSelector")
