"""``weir verify``: a fault-injection verifier (Jepsen's Kafka workload, built in).

- ``history``: operations recorded as invocations and completions (JSON lines).
- ``workload``: confluent-kafka producer and consumers that record into the history.
- ``nemesis``: seeded faults (kill, pause, partition, disk-full, controller, zookeeper).
- ``proxy``: the TCP proxies that make network partitions possible without privileges.
- ``checker``: pure history -> anomalies.
- ``replicas``: byte-equality of the replicas below the high watermark.
- ``report``: summary, anomalies in context, plots, index.html.
- ``runner``/``cli``: one run, and the ``weir verify`` subcommand.
"""
