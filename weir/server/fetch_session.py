"""Incremental fetch sessions (KIP-227): the broker's session cache, sans I/O.

Kafka's ``FetchManager``, ``FetchSessionCache``, ``FetchSession``, ``CachedPartition`` and the
four ``FetchContext`` kinds (``kafka/server/FetchSession.scala``), in one process-local cache:

* A *full* fetch (epoch ``INITIAL_EPOCH`` 0, or ``FINAL_EPOCH`` -1) names every partition.
  Any session it names is closed; with epoch 0 the response creates a new session (if the
  cache has room or can evict) whose id the client uses from then on, with epoch -1 none is
  created (a *sessionless* fetch, what clients before Fetch v7 always get).
* An *incremental* fetch (session id and the session's epoch) names only partitions added or
  changed since the last request, and ``forgotten_topics_data`` those to drop. The broker
  reads every partition of the session but answers only those with something new: records,
  an error, a changed high watermark or log start offset, a preferred read replica or a
  diverging epoch (``CachedPartition.maybeUpdateResponseData``). Partitions that returned
  records move to the end of the session, so that ``max_bytes`` serves all in turn.
* Errors: an unknown session id is ``FETCH_SESSION_ID_NOT_FOUND``, a wrong epoch
  ``INVALID_FETCH_SESSION_EPOCH``, and a session created with topic ids (Fetch v13+) used by
  an older version, or the reverse, ``FETCH_SESSION_TOPIC_ID_ERROR``.
* ``max.incremental.fetch.session.cache.slots`` sessions at most (0 disables sessions).
  When full, a new session may evict: first a session unused for 120 s (Kafka's
  ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``), otherwise the least valuable one if the
  new one is worth more: follower (privileged) sessions over consumer ones, then more
  partitions over fewer; a privileged session younger than 120 s is evicted by nobody and
  a consumer session younger than 120 s only by a follower's.

Kafka splits the cache into 8 shards to spread lock contention; one event loop needs one.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from weir.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000
"""Kafka's ``KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``."""
_MAX_INT = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """``FetchMetadata.nextEpoch``: -1 stays -1, 2**31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT else epoch + 1


@dataclass(slots=True)
class PartitionRequest:
    """One partition of a fetch, as the request (or the session cache) gives it.

    ``topic`` is None when a Fetch v13+ names a topic id this broker does not know
    (answered UNKNOWN_TOPIC_ID); the session keeps it and resolves it once the id is known.
    """

    topic: str | None
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    # What the replica manager reads for this partition (a FetchPartition), built by the
    # Fetch handler the first time and kept with the request: a session's partitions that
    # the client does not name again are read from the same object at every fetch.
    fetch: Any = None

    @property
    def key(self) -> tuple[Any, int]:
        """A partition's identity in a session: its topic id when there is one (Kafka's
        ``CachedPartition.equals``), else its name.  The id as its 128-bit integer: a
        ``uuid.UUID`` hashes in Python code, and sessions look their partitions up several
        times per partition and fetch."""
        topic_id = self.topic_id
        if topic_id is not None and topic_id.int != 0:
            return (topic_id.int, self.partition)
        return (self.topic, self.partition)


@dataclass(slots=True)
class CachedPartition:
    req: PartitionRequest
    high_watermark: int = -1
    local_log_start_offset: int = -1

    def update_request(self, req: PartitionRequest) -> None:
        topic = self.req.topic if req.topic is None else req.topic
        self.req = req
        self.req.topic = topic

    def must_respond(self, resp: Any, update: bool) -> bool:
        """Kafka's ``maybeUpdateResponseData``; ``resp`` has ``records``, ``error_code``,
        ``high_watermark``, ``log_start_offset``, ``preferred_read_replica`` and
        ``diverging_epoch`` (a :class:`weir.protocol.fetch_response.PartitionData`)."""
        respond = records_size(resp.records) > 0
        if self.high_watermark != resp.high_watermark:
            respond = True
            if update:
                self.high_watermark = resp.high_watermark
        if self.local_log_start_offset != resp.log_start_offset:
            respond = True
            if update:
                self.local_log_start_offset = resp.log_start_offset
        if resp.preferred_read_replica >= 0:
            respond = True
        if resp.error_code != 0:
            # Forget the high watermark so that the partition is sent again once the
            # error is gone.
            if update:
                self.high_watermark = -1
            respond = True
        if resp.diverging_epoch is not None:
            respond = True
        return respond


def records_size(records: Any) -> int:
    if records is None:
        return 0
    size = getattr(records, "size", None)
    return int(size) if isinstance(size, int) else len(records)


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool
    partitions: OrderedDict[tuple[Any, int], CachedPartition]
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch: Iterable[PartitionRequest], forgotten: Iterable[PartitionRequest]
               ) -> None:
        for req in fetch:
            cached = self.partitions.get(req.key)
            if cached is None:
                self.partitions[req.key] = CachedPartition(req)
            else:
                cached.update_request(req)
        for req in forgotten:
            self.partitions.pop(req.key, None)


class FetchContext:
    """What one Fetch request reads and how its response is shaped (Kafka's contexts)."""

    kind = "sessionless"
    # Incremental contexts only: unchanged(req, high_watermark, log_start_offset) says that a
    # partition read with no records, no error, no diverging epoch and no preferred read
    # replica has nothing new for the session (so its answer need not even be built).
    unchanged: Callable[[PartitionRequest, int, int], bool] | None = None

    def __init__(self, partitions: list[PartitionRequest], error: int = 0) -> None:
        self.partitions = partitions
        self.error = error

    def respond(self, results: list[tuple[PartitionRequest, Any]], now_ms: int
                ) -> tuple[int, int, list[tuple[PartitionRequest, Any]]]:
        """(top-level error, session id, the partitions to answer, in order)."""
        return self.error, INVALID_SESSION_ID, results if not self.error else []


class SessionErrorContext(FetchContext):
    kind = "error"

    def __init__(self, error: ErrorCode) -> None:
        super().__init__([], int(error))


class FullFetchContext(FetchContext):
    kind = "full"

    def __init__(self, cache: FetchSessionCache, partitions: list[PartitionRequest],
                 uses_topic_ids: bool, privileged: bool) -> None:
        super().__init__(partitions)
        self._cache = cache
        self._uses_topic_ids = uses_topic_ids
        self._privileged = privileged

    def respond(self, results, now_ms):
        def build() -> OrderedDict[tuple[Any, int], CachedPartition]:
            out: OrderedDict[tuple[Any, int], CachedPartition] = OrderedDict()
            for req, resp in results:
                out[req.key] = CachedPartition(req, resp.high_watermark, resp.log_start_offset)
            return out

        session_id = self._cache.maybe_create_session(
            now_ms, self._privileged, len(results), self._uses_topic_ids, build)
        return 0, session_id, results


class IncrementalFetchContext(FetchContext):
    kind = "incremental"

    def __init__(self, session: FetchSession, request_epoch: int) -> None:
        super().__init__([c.req for c in session.partitions.values()])
        self.session = session
        self._request_epoch = request_epoch

    def unchanged(self, req: PartitionRequest, high_watermark: int,  # type: ignore[override]
                  log_start_offset: int) -> bool:
        """For a read with no records, error, diverging epoch or preferred read replica:
        True when :meth:`CachedPartition.must_respond` would be False and change nothing."""
        cached = self.session.partitions.get(req.key)
        return (cached is not None and cached.high_watermark == high_watermark
                and cached.local_log_start_offset == log_start_offset)

    def respond(self, results, now_ms):
        session = self.session
        if session.epoch != next_epoch(self._request_epoch):
            # Another request of the same session was answered meanwhile (a duplicate).
            return int(ErrorCode.invalid_fetch_session_epoch), session.id, []
        kept = []
        for req, resp in results:
            cached = session.partitions.get(req.key)
            if cached is None:  # forgotten by a later request while this one waited
                continue
            if cached.must_respond(resp, update=True):
                kept.append((req, resp))
                if records_size(resp.records) > 0:
                    session.partitions.move_to_end(req.key)
        return 0, session.id, kept


@dataclass
class FetchSessionCache:
    """Kafka's ``FetchSessionCacheShard`` and ``FetchManager.newContext``."""

    max_entries: int = 1000
    eviction_ms: int = EVICTION_MS
    rng: random.Random = field(default_factory=random.Random)
    sessions: dict[int, FetchSession] = field(default_factory=dict)
    num_partitions: int = 0
    evictions: int = 0

    # -- FetchManager.newContext ---------------------------------------------------------

    def new_context(self, version: int, session_id: int, epoch: int, is_follower: bool,
                    fetch: list[PartitionRequest], forgotten: list[PartitionRequest],
                    now_ms: int, resolve: Callable[[uuid.UUID], str | None] | None = None
                    ) -> FetchContext:
        if version < 7:  # no sessions before Fetch v7 (KIP-227)
            return FetchContext(fetch)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full fetch closes the session it names
            if epoch == FINAL_EPOCH:
                return FetchContext(fetch)
            return FullFetchContext(self, fetch, version >= 13, is_follower)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != (version >= 13):
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
        session.update(fetch, forgotten)
        if not session.partitions:
            self.remove(session_id)
            return FetchContext(fetch)
        if session.uses_topic_ids and resolve is not None:
            for cached in session.partitions.values():
                if cached.req.topic is None and cached.req.topic_id is not None:
                    cached.req.topic = resolve(cached.req.topic_id)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, epoch)

    # -- the cache -----------------------------------------------------------------------

    def maybe_create_session(self, now_ms: int, privileged: bool, size: int,
                             uses_topic_ids: bool,
                             build: Callable[[], OrderedDict[tuple[Any, int], CachedPartition]]
                             ) -> int:
        if self.max_entries <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size,
                                                                          now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, build(), uses_topic_ids,
                               now_ms, now_ms, next_epoch(INITIAL_EPOCH))
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _new_session_id(self) -> int:
        while True:
            sid = self.rng.randint(1, _MAX_INT - 1)
            if sid not in self.sessions:
                return sid

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False  # the new session is worth less than the least valuable one
        self.remove(victim.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None and session.cached_size > 0:
            self.num_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Mark a session used now and refresh its size and evictability
        (``FetchSessionCacheShard.touch``)."""
        session.last_used_ms = now_ms
        if session.cached_size > 0:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.num_partitions += session.cached_size
        old_enough = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old_enough
        session.evictable_by_all = old_enough
