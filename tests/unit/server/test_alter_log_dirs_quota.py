"""``replica.alter.log.dirs.io.max.bytes.per.second`` is a dynamic broker config (as in
Kafka): a change reaches the log dir mover's quota without a restart."""

from __future__ import annotations

from types import SimpleNamespace

from weir.config import DYNAMIC_BROKER_CONFIGS, BrokerConfig
from weir.replication.log_dir_mover import UNLIMITED, CopyQuota
from weir.server.dynamic_config import DynamicBrokerConfigs
from weir.server.reconfigurables import AlterLogDirsQuota

KEY = "replica.alter.log.dirs.io.max.bytes.per.second"


def test_the_copy_rate_changes_live():
    assert KEY in DYNAMIC_BROKER_CONFIGS
    config = BrokerConfig.from_dict({"broker.id": "1", "zookeeper.connect": "zk:2181"})
    quota = CopyQuota(config.get(KEY))
    assert quota.rate == UNLIMITED and not quota.limited
    broker = SimpleNamespace(config=config)
    dynamic = DynamicBrokerConfigs(1, None, lambda: broker.config,
                                   lambda new: setattr(broker, "config", new),
                                   [AlterLogDirsQuota(quota)])
    dynamic.apply(config.with_dynamic({}, {KEY: "1048576"}))
    assert quota.rate == 1048576 and quota.limited
    dynamic.apply(config.with_dynamic({}, {}))
    assert quota.rate == UNLIMITED
