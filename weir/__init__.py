"""Weir: a Kafka-compatible, replicated, partitioned commit log."""

__version__ = "0.1.0"
