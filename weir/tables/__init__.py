"""Topic tables: a topic kept as an Apache Iceberg table, written exactly once from the log by
its partitions' leaders (docs/tables.md).  Importing this package imports no PyIceberg."""
