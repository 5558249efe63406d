"""Running and inspecting a local Weir cluster, as a library: ``LocalCluster`` and its cluster
file, the read-only ZooKeeper view, process helpers, the local CA and SCRAM users of a secure
cluster, and the consumer-offset reset planner.  The ``weir`` command (``weir.cli``), the
console, ``weir verify``, the audit job, the benchmarks and the tests build on it; it imports
no command-line code."""
