"""The Kafka wire protocol: framing, the kio codec, inter-broker schemas, error codes."""
