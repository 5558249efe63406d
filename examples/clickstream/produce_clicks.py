"""Produce sample clickstream events (JSON) into a Weir topic.

    python examples/clickstream/produce_clicks.py --bootstrap 127.0.0.1:9092 --events 20000

Each event is ``{"user": "u17", "page": "/pricing", "event_time": "2024-..."}``, keyed by
user, with event times spread evenly over the last ``--minutes`` minutes.  Creates the
``clicks`` and ``page-counts`` topics when they do not exist.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

PAGES = ["/", "/pricing", "/docs", "/docs/spark", "/blog", "/signup", "/login", "/about"]
WEIGHTS = [30, 10, 15, 8, 12, 5, 15, 5]


def ensure_topics(bootstrap: str, topics: dict[str, int], replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, p, replication) for t, p in topics.items()],
                                  operation_timeout=30, request_timeout=30)
    for name, future in futures.items():
        try:
            future.result(60)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # an existing topic is fine
            raise RuntimeError(f"cannot create topic {name}: {exc}") from exc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--replication", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    ensure_topics(args.bootstrap, {args.topic: 3, "page-counts": 1}, args.replication)
    rng = random.Random(args.seed)
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                         "linger.ms": 20})
    end = time.time()
    start = end - args.minutes * 60
    for i in range(args.events):
        stamp = start + (end - start) * i / args.events
        event = {"user": f"u{rng.randrange(500)}", "page": rng.choices(PAGES, WEIGHTS)[0],
                 "event_time": datetime.fromtimestamp(stamp, UTC).isoformat()}
        while True:
            try:
                producer.produce(args.topic, key=event["user"], value=json.dumps(event),
                                 timestamp=int(stamp * 1000))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise SystemExit("some events were not delivered")
    print(f"produced {args.events} click events into '{args.topic}' at {args.bootstrap}")


if __name__ == "__main__":
    main()
