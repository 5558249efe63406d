"""A stand-in broker for LocalCluster tests against a real ZooKeeper.

Run as ``python mini_broker.py weir broker start --config FILE`` (the command line reads
like a broker's): registers ``/brokers/ids/<id>``, tries to become controller, and holds
its session until SIGTERM.
"""

import signal
import sys
import threading

from weir.config import BrokerConfig
from weir.coordination.codecs import BrokerInfo
from weir.coordination.zk import ZkClient


def main() -> int:
    cfg = BrokerConfig.from_file(sys.argv[-1])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    zk = ZkClient(cfg.zookeeper_connect, session_timeout_ms=cfg.zookeeper_session_timeout_ms)
    zk.start()
    try:
        zk.register_broker(BrokerInfo(cfg.broker_id, cfg.advertised_host, cfg.advertised_port))
        zk.try_become_controller(cfg.broker_id)
        print(f"mini broker {cfg.broker_id} registered", flush=True)
        stop.wait(120)
    finally:
        zk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
