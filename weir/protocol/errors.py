"""Kafka error codes at the edge: one exception type carrying the code.

Every layer raises :class:`KafkaError` (or a subclass) with the Kafka error code that a
client should see; handlers turn it into the per-partition error field.  The codes are
kio's :class:`~kio.schema.errors.ErrorCode` enum, so names match Kafka's
(``ErrorCode.not_leader_or_follower`` ...).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError"]


class KafkaError(Exception):
    """An error with a Kafka error code. ``str(err)`` is the human message."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or code.name

    @property
    def retriable(self) -> bool:
        return bool(self.code.retriable)

    def __repr__(self) -> str:
        return f"KafkaError({self.code.name}, {self.message!r})"
