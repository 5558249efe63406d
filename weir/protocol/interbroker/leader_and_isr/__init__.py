"""leader_and_isr: the ZooKeeper-mode version Weir speaks (see the version package)."""
