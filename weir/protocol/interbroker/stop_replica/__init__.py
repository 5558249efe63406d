"""stop_replica: the ZooKeeper-mode version Weir speaks (see the version package)."""
