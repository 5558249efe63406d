"""controlled_shutdown: the ZooKeeper-mode version Weir speaks (see the version package)."""
