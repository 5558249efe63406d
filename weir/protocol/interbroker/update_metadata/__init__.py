"""update_metadata: the ZooKeeper-mode version Weir speaks (see the version package)."""
