"""Kafka's command-line tools for scripts written against Apache Kafka (docs/cli.md).

``kafka-topics.sh``, ``kafka-configs.sh``, ``kafka-acls.sh`` and
``kafka-consumer-groups.sh`` are console scripts with Kafka 3.x's flags and output lines for
the common verbs (TopicCommand, ConfigCommand, AclCommand, ConsumerGroupCommand), built on
the same confluent-kafka calls as ``weir topic|config|acl|group``.
"""
