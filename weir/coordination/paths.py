"""Kafka's ZooKeeper layout (ZooKeeper-mode Kafka 3.x), relative to the chroot.

Only names live here: each function builds one path exactly as Kafka spells it, so a
Weir cluster's ZooKeeper tree looks like a Kafka cluster's to tools that read it.
"""

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
CONFIG_IPS = "/config/ips"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "/log_dir_event_notification/log_dir_event_"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"

PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    CONFIG_BROKERS,
    CONFIG_IPS,
)
"""Paths every broker makes sure exist at startup (Kafka's ``PersistentZkPaths``)."""


def consumer_offset(group: str, topic: str, partition: int) -> str:
    """``/consumers/<group>/offsets/<topic>/<partition>``: an offset committed with
    OffsetCommit v0 (Kafka's ``ConsumerOffset``; the offset as a decimal string)."""
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def broker(broker_id: int) -> str:
    """``/brokers/ids/<id>``: a broker's ephemeral registration."""
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    """``/brokers/topics/<topic>``: the topic's replica assignment and id."""
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    """``/brokers/topics/<topic>/partitions``."""
    return f"{topic(name)}/partitions"


def partition(name: str, partition_id: int) -> str:
    """``/brokers/topics/<topic>/partitions/<p>``."""
    return f"{topic_partitions(name)}/{partition_id}"


def partition_state(name: str, partition_id: int) -> str:
    """``/brokers/topics/<topic>/partitions/<p>/state``: leader, ISR and epochs."""
    return f"{partition(name, partition_id)}/state"


def topic_config(name: str) -> str:
    """``/config/topics/<topic>``: the topic's config overrides."""
    return f"{CONFIG_TOPICS}/{name}"


def broker_config(broker_id: int | str) -> str:
    """``/config/brokers/<id>`` (``<default>`` for the cluster-wide defaults)."""
    return f"{CONFIG_BROKERS}/{broker_id}"


def delete_topic(name: str) -> str:
    """``/admin/delete_topics/<topic>``: marks a topic for deletion."""
    return f"{DELETE_TOPICS}/{name}"
