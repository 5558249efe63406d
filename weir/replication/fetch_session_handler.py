"""The client side of an incremental fetch session (KIP-227), sans I/O.

Kafka's ``FetchSessionHandler`` (``org.apache.kafka.clients``), as its ReplicaFetcherThread
uses it: the first request is full (session id 0, epoch 0) and names every partition; once
the leader answers with a session id, each request names only the partitions added or whose
fetch parameters changed since the last one, lists those no longer fetched as forgotten, and
carries the next epoch. Any session error, or a lost response, makes the next request full
again (closing the old session, or starting afresh when the leader no longer knows it).

With topic ids (Fetch v13+, KIP-516) a partition is known to the session by its topic id
too: a partition whose topic id changed is forgotten under the old id and sent under the
new one in the same request, and a session never mixes the two ways of naming topics (the
request that switches closes the session and starts a full one, as Kafka's
``FetchSessionHandler.Builder`` does when ``canUseTopicIds`` changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_INT = 0x7FFFFFFF


def _next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT else epoch + 1


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What to send: the partitions to name, those to forget (each with the topic id the
    session knows it by), the session id and epoch, and whether topics go by id."""

    to_send: dict[TopicPartition, dict[str, Any]]
    to_forget: list[tuple[TopicPartition, str | None]]
    session_id: int
    epoch: int
    topic_ids: bool = False

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass
class FetchSessionHandler:
    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    session_partitions: dict[TopicPartition, dict[str, Any]] = field(default_factory=dict)
    uses_topic_ids: bool = False  # how the session names its topics (Fetch v13+ or not)
    _sent: dict[TopicPartition, dict[str, Any]] = field(default_factory=dict)
    _sent_ids: bool = False

    def build(self, wanted: dict[TopicPartition, dict[str, Any]],
              topic_ids: bool = False) -> FetchRequestData:
        """The next request for the partitions ``wanted`` (each with its fetch fields, the
        topic id under ``"topic_id"``); ``topic_ids``: the request names topics by id."""
        self._sent, self._sent_ids = dict(wanted), topic_ids
        if self.epoch not in (INITIAL_EPOCH, FINAL_EPOCH) and topic_ids != self.uses_topic_ids:
            self.epoch = INITIAL_EPOCH  # close the session, open a full one the other way
        if self.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            return FetchRequestData(dict(wanted), [], self.session_id, self.epoch, topic_ids)
        to_send = {tp: data for tp, data in wanted.items()
                   if self.session_partitions.get(tp) != data}
        forget = [(tp, data.get("topic_id")) for tp, data in self.session_partitions.items()
                  if tp not in wanted or (topic_ids and data.get("topic_id")
                                          != wanted[tp].get("topic_id"))]
        return FetchRequestData(to_send, forget, self.session_id, self.epoch, topic_ids)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Advance after a response; False when it was a session error (nothing to apply)."""
        if error_code != ErrorCode.none:
            if error_code == ErrorCode.fetch_session_id_not_found:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH  # a full request that closes the session
            self.session_partitions = {}
            return False
        self.session_partitions, self.uses_topic_ids = self._sent, self._sent_ids
        if session_id == INVALID_SESSION_ID:
            # The leader keeps no session (full cache, or it was closed): stay full.
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = _next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """No response (connection lost, timeout): the next request is full, closing the
        session if there was one, since the leader may or may not have advanced it."""
        self.epoch = INITIAL_EPOCH
        self.session_partitions = {}
