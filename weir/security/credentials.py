"""SCRAM credentials in ZooKeeper, as Kafka stores them: ``/config/users/<user>`` holds
``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,
iterations=4096"}}`` and every change posts a ``/config/changes`` notification
(``entity_path`` ``users/<user>``), on which every broker drops its cached credentials.

``zk`` is Weir's ZooKeeper client (``get_entity_config``, ``set_entity_config``,
``get_children``); the calls are blocking, so the broker runs them in a worker thread.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, unquote

from weir.security.scram import HASHES, ScramCredential

log = logging.getLogger(__name__)

ENTITY = "users"


def sanitize(user: str) -> str:
    """Kafka's ``Sanitizer``: a user name as a znode name, URL-encoded as Java's URLEncoder
    does (only letters, digits and ``.-_`` are kept; a space is %20, ``*`` is %2A)."""
    return quote(user, safe="-._").replace("~", "%7E")


def desanitize(node: str) -> str:
    return unquote(node)


class ScramCredentialStore:
    def __init__(self, zk: Any) -> None:
        self.zk = zk
        self._cache: dict[str, dict[str, str]] = {}

    def invalidate(self) -> None:
        """A ``/config/changes`` notification: re-read users on their next use."""
        self._cache.clear()

    def _config(self, user: str) -> dict[str, str]:
        cached = self._cache.get(user)
        if cached is None:
            cached = dict(self.zk.get_entity_config(ENTITY, sanitize(user)))
            # Only users that exist are cached: names tried by unauthenticated clients must
            # not grow the cache (Kafka's CredentialCache holds existing users only).
            if cached:
                self._cache[user] = cached
        return cached

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential (blocking: ZooKeeper on a cache miss)."""
        text = self._config(user).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_kafka_string(text)
        except ValueError as exc:
            log.warning("ignoring the %s credential of user %r in ZooKeeper: %s", mechanism,
                        user, exc)
            return None

    def users(self) -> list[str]:
        """Users with at least one SCRAM credential (blocking)."""
        out = []
        for node in self.zk.get_children(f"/config/{ENTITY}"):  # [] when there is none
            user = desanitize(node)
            if any(m in HASHES for m in self._config(user)):
                out.append(user)
        return out

    def mechanisms(self, user: str) -> dict[str, int]:
        """Mechanism → iterations of a user's credentials (blocking)."""
        out = {}
        for mechanism in HASHES:
            cred = self.credential(user, mechanism)
            if cred is not None:
                out[mechanism] = cred.iterations
        return out

    def alter(self, user: str, upserts: dict[str, ScramCredential],
              deletions: set[str]) -> None:
        """Write a user's credentials (other keys of its config are kept; blocking)."""
        config = dict(self.zk.get_entity_config(ENTITY, sanitize(user)))
        for mechanism in deletions:
            config.pop(mechanism, None)
        for mechanism, cred in upserts.items():
            config[mechanism] = cred.to_kafka_string()
        self.zk.set_entity_config(ENTITY, sanitize(user), config)
        self._cache.pop(user, None)
