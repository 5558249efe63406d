"""The translator's asyncio shell on a broker: it follows this broker's partition leadership,
asks the :class:`~weir.tables.translator.Translator` what to do, reads committed records'
locations from the local log on the event loop (Kafka's read path: ``Log.read`` up to the
last stable offset, and the aborted transactions from the transaction indexes) and hands the
decoding and the Iceberg commit to a worker process (``spawn``, as the log cleaner's), so
PyIceberg's imports and CPU never touch the event loop.  The broker starts and serves whether
PyIceberg imports or the catalog answers: a failed job only makes the table fall behind,
which ``weir_iceberg_lag_records`` and a log line say, and it is retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from weir.common import TopicPartition
from weir.protocol.errors import KafkaError
from weir.storage.log_cleaner import new_worker_pool
from weir.tables import worker
from weir.tables.settings import CATALOG_KEYS
from weir.tables.translator import Commit, Load, Translator

log = logging.getLogger(__name__)

KEY_VALUE = "key_value"
MODE = "weir.iceberg.mode"
TARGET_LAG = "weir.iceberg.target.lag.ms"
TICK_S = 0.25
TOPICS_RECHECK_MS = 2000  # how soon a topic switched to key_value (or off) is seen
READ_BYTES = 8 << 20  # one read of the log
COMMIT_BYTES = 128 << 20  # at most this much log of a partition in one commit
SHUTDOWN_WAIT_S = 10


def _now_ms() -> int:
    return int(time.time() * 1000)


class TableService:
    """Owns the translator, its worker process and its loop (see the module docstring)."""

    def __init__(self, partitions: dict, topic_config: Callable[[str], dict[str, Any]],
                 broker_config: Callable[[], Any]) -> None:
        self.partitions = partitions  # the replica manager's, TopicPartition -> Partition
        self.topic_config = topic_config
        self.broker_config = broker_config
        self.translator = Translator()
        self.commit_failures = 0
        self._pool: ProcessPoolExecutor | None = None
        self._task: asyncio.Task | None = None
        self._jobs: set[asyncio.Task] = set()
        # The led topics with weir.iceberg.mode=key_value and their configs, looked up again
        # every TOPICS_RECHECK_MS: a tick touches those topics' partitions only, not every
        # partition this broker leads.
        self._table_topics: dict[str, dict[str, Any]] = {}
        self._topics_checked_ms = -TOPICS_RECHECK_MS

    def on_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        """A replica manager leadership listener."""
        if tp.topic.startswith("__"):
            return
        self.translator.on_leadership(tp, is_leader, leader_epoch)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="iceberg-tables")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._jobs) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._pool is not None:  # a commit in flight ends in the worker, or is abandoned
            pool, self._pool = self._pool, None
            try:
                async with asyncio.timeout(SHUTDOWN_WAIT_S):
                    await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
            except TimeoutError:  # the worker exits with the broker (new_worker_pool)
                log.warning("topic table worker still committing after %d s; not waited for",
                            SHUTDOWN_WAIT_S)

    def _catalog_configs(self) -> dict[str, str | None]:
        config = self.broker_config()
        return {key: config.get(key) for key in CATALOG_KEYS}

    def _table_topic(self, topic: str) -> dict[str, Any] | None:
        try:
            config = self.topic_config(topic)
        except (KafkaError, KeyError, ValueError):
            return None
        return config if config.get(MODE) == KEY_VALUE else None

    async def _run(self) -> None:
        while True:
            try:
                self._tick(_now_ms())
            except Exception:
                log.exception("iceberg table translator tick failed")
            await asyncio.sleep(TICK_S)

    def _tick(self, now_ms: int) -> None:
        if now_ms - self._topics_checked_ms >= TOPICS_RECHECK_MS:
            self._topics_checked_ms = now_ms
            self._table_topics = {
                topic: config for topic in list(self.translator.by_topic)
                if (config := self._table_topic(topic)) is not None}
        due: dict[str, list[tuple[Load | Commit, Any]]] = {}
        for topic, config in self._table_topics.items():
            target_lag_ms = int(config.get(TARGET_LAG) or 60000)
            for tp in list(self.translator.by_topic.get(topic, ())):
                p = self.partitions.get(tp)
                if p is None or p.log is None or not p.is_leader:
                    continue
                action = self.translator.decide(tp, p.log.last_stable_offset, target_lag_ms,
                                                now_ms)
                if action is not None:
                    due.setdefault(topic, []).append((action, p.log))
        loop = asyncio.get_running_loop()
        for topic, actions in due.items():  # one job, one snapshot, per topic
            job = loop.create_task(self._topic_job(topic, actions))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    def _worker_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = new_worker_pool(1)
        return self._pool

    async def _topic_job(self, topic: str, actions: list[tuple[Load | Commit, Any]]) -> None:
        """The loads, then one commit of every due partition of ``topic``."""
        loads = [(a, plog) for a, plog in actions if isinstance(a, Load)]
        if loads:
            result = await self._call(worker.load_offsets, self._catalog_configs(), topic)
            now = _now_ms()
            for action, plog in loads:
                self._apply(action, plog, result, now)
        commits, parts = [], []
        for action, plog in actions:
            if not isinstance(action, Commit):
                continue
            try:
                regions, upper = self._regions(plog, action)
            except (KafkaError, OSError) as exc:
                self._failed(action.tp, action.generation, f"{type(exc).__name__}: {exc}",
                             _now_ms())
                continue
            commits.append((action, plog))
            parts.append((action.tp.partition, action.start, upper, regions))
        if commits:
            result = await self._call(worker.translate, self._catalog_configs(), topic, parts)
            now = _now_ms()
            for action, plog in commits:
                self._apply(action, plog, result, now)

    async def _call(self, fn: Callable, *args: Any) -> dict[str, Any]:
        try:
            return await self._submit(fn, *args)
        except (OSError, BrokenProcessPool) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _apply(self, action: Load | Commit, plog: Any, result: dict[str, Any],
               now: int) -> None:
        """A job's result, for one of its partitions."""
        tp = action.tp
        if "error" in result:
            self._failed(tp, action.generation, result["error"], now)
            return
        next_offset = result["offsets"].get(tp.partition, 0)
        if next_offset > plog.log_end_offset:
            # The table holds offsets this log never had: a deleted topic's table found by a
            # topic of the same name, or a log truncated by an unclean election.  Appending
            # would skip this log's records below the table's offset.
            self._failed(tp, action.generation, f"the table is ahead of the log (table at "
                         f"{next_offset}, log end {plog.log_end_offset}): drop or rename the "
                         f"table of a deleted topic", now)
            return
        if isinstance(action, Load):
            log.info("topic table of %s resumes at offset %d (%s)", tp, next_offset,
                     result["metadata_location"])
            self.translator.loaded(tp, action.generation, next_offset,
                                   result["metadata_location"])
            return
        if tp.partition in result["stale"]:
            log.info("topic table of %s was at %d, not %d: resuming there", tp, next_offset,
                     action.start)
        self.translator.committed(tp, action.generation, next_offset,
                                  result["rows"].get(tp.partition, 0),
                                  result["metadata_location"], now)

    def _failed(self, tp: TopicPartition, generation: int, error: str, now_ms: int) -> None:
        self.commit_failures += 1
        backoff = self.translator.failed(tp, generation, error, now_ms)
        st = self.translator.partitions.get(tp)
        log.warning("topic table of %s falls behind (%d records not in the table; retry in "
                    "%d ms): %s", tp, st.lag_records if st else -1, backoff, error)

    def _regions(self, plog: Any, action: Commit) -> tuple[list, int]:
        """Where the committed batches of ``[start, upper)`` are (read on the event loop: the
        segment list changes there), up to COMMIT_BYTES, and the offset they reach."""
        start, upper = action.start, action.upper
        if start < plog.log_start_offset:
            # Retention deleted records the table never got (it fell behind for longer than
            # the topic's retention): the marker moves to the log start, leaving a gap.
            log.error("topic table of %s: offsets [%d, %d) were deleted before they reached "
                      "the table", action.tp, start, plog.log_start_offset)
            return [], min(plog.log_start_offset, upper)
        regions: list = []
        offset, total = start, 0
        while offset < upper and total < COMMIT_BYTES:
            read = plog.read(offset, READ_BYTES, max_offset=upper, min_one_batch=True)
            if not read.size:
                break
            aborted = plog.collect_aborted_transactions(offset, read.last_offset + 1)
            regions.append((str(read.file_path), read.position, read.size, read.inode,
                            [(a.producer_id, a.first_offset) for a in aborted]))
            total += read.size
            offset = read.last_offset + 1
        return regions, min(offset, upper)

    async def _submit(self, fn: Callable, *args: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._worker_pool(), fn, *args)
        except BrokenProcessPool:
            self._pool = None  # the worker died (killed, out of memory): a new one next time
            raise

    # -- metrics ---------------------------------------------------------------------------

    def collect(self) -> Iterator[Any]:
        """A prometheus_client custom collector for the broker's /metrics."""
        lag = GaugeMetricFamily(
            "weir_iceberg_lag_records",
            "Offsets below the last stable offset not yet in the partition's Iceberg table "
            "(on the partition's leader).", labels=["topic", "partition"])
        committed = GaugeMetricFamily(
            "weir_iceberg_committed_offset",
            "The table's next offset of the partition (weir.next-offsets); -1 until read.",
            labels=["topic", "partition"])
        for tp, st in sorted(self.translator.partitions.items()):
            if tp.topic not in self._table_topics:
                continue
            labels = [tp.topic, str(tp.partition)]
            lag.add_metric(labels, st.lag_records)
            committed.add_metric(labels, -1 if st.next_offset is None else st.next_offset)
        yield lag
        yield committed
        failures = CounterMetricFamily("weir_iceberg_commit_failures",
                                       "Table loads and commits that failed (then retried).")
        failures.add_metric([], self.commit_failures)
        yield failures
