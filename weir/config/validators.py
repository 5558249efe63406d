"""The validator language of the key table, and the parsing of values into their types.

A validator is a callable that takes a parsed value and returns None when the value is fine,
or the words that say what is allowed ("a value of at least 1"); :func:`check` turns those
words into a :class:`ConfigError` naming the key, the way Kafka's ``ConfigDef.Validator``
raises ``ConfigException(name, value, message)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "INT_MAX", "LISTENER_RE", "LONG_MAX", "ConfigError", "OneOf", "Range", "Validator", "check",
    "format_value", "ip_overrides", "listener_list", "non_empty", "parse_ip_overrides",
    "parse_value", "principal_list", "throttled_replicas",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_BOUNDS = {"int": (-(2**31), INT_MAX), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}

Validator = Callable[[Any], "str | None"]


class ConfigError(ValueError):
    """An invalid or missing broker configuration value; the message names the key."""


@dataclass(frozen=True)
class Range:
    """Numeric range, either end open (Kafka's ``ConfigDef.Range``)."""

    lo: float | None = None
    hi: float | None = None

    def __call__(self, value: Any) -> str | None:
        if value is None:
            return None
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            if self.hi is None:
                return f"a value of at least {self.lo}"
            if self.lo is None:
                return f"a value of at most {self.hi}"
            return f"a value between {self.lo} and {self.hi}"
        return None


@dataclass(frozen=True)
class OneOf:
    """A single value from a fixed set; a list: every element from the set (Kafka's
    ``ConfigDef.ValidString`` / ``ValidList``)."""

    allowed: tuple[str, ...]
    case_insensitive: bool = False

    def __call__(self, value: Any) -> str | None:
        items = value if isinstance(value, list) else [value]
        for item in items:
            probe = item.lower() if self.case_insensitive and isinstance(item, str) else item
            pool = [a.lower() for a in self.allowed] if self.case_insensitive else self.allowed
            if probe not in pool:
                return "one of " + ", ".join(self.allowed)
        return None


def principal_list(value: Any) -> str | None:
    """``super.users``: ``Type:name`` principals separated by ';' (Kafka's parseKafkaPrincipal)."""
    for item in str(value or "").split(";"):
        kind, sep, name = item.strip().partition(":")
        if item.strip() and (not sep or not kind or not name):
            return "principals of the form Type:name separated by ';' (User:admin;User:broker)"
    return None


def non_empty(value: Any) -> str | None:
    return "a non-empty value" if value is None or value == "" or value == [] else None


LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*):(\d+)$")


def listener_list(value: Any) -> str | None:
    for item in value or []:
        match = LISTENER_RE.match(item)
        if match is None or not 0 <= int(match.group(3)) <= 65535:
            return "a list of NAME://host:port entries (port 0..65535)"
    return None


def throttled_replicas(value: Any) -> str | None:
    """``*.replication.throttled.replicas``: '*' or ``partition:broker`` pairs."""
    if value == ["*"] or not value:
        return None
    if all(re.fullmatch(r"\d+:\d+", item) for item in value):
        return None
    return "'*' or a list of partition:broker pairs"


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def ip_overrides(value: Any) -> str | None:
    try:
        parse_ip_overrides(str(value))
    except ValueError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------------------------------------
# Values


def parse_value(key: str, type_: str, raw: Any) -> Any:
    """Parse ``raw`` as ``type_``; a non-string is read through its Kafka string form.

    Raises ConfigError naming the key, the value and the expected type.
    """
    if raw is None:
        return None
    text = raw.strip() if isinstance(raw, str) else (format_value(raw) or "")
    try:
        if type_ == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if type_ in _BOUNDS:
            value = int(text)
            lo, hi = _BOUNDS[type_]
            if not lo <= value <= hi:
                raise ValueError
            return value
        if type_ == "double":
            return float(text)
        if type_ == "list":
            return [item.strip() for item in text.split(",") if item.strip()]
        return text
    except ValueError:
        raise ConfigError(
            f"Invalid value {raw!r} for configuration {key}: expected {_type_words(type_)}"
        ) from None


def _type_words(type_: str) -> str:
    words = {"bool": "true or false", "int": "a 32-bit integer", "short": "a 16-bit integer",
             "long": "a 64-bit integer", "double": "a number", "list": "a comma-separated list"}
    return words.get(type_, "a string")


def format_value(value: Any) -> str | None:
    """Kafka's string form of a typed value (DescribeConfigs, properties files)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def check(key: str, value: Any, validator: Validator | None) -> None:
    """Raise ConfigError naming ``key`` when ``validator`` refuses ``value``."""
    if validator is None or value is None:
        return
    allowed = validator(value)
    if allowed is not None:
        raise ConfigError(
            f"Invalid value {format_value(value)!r} for configuration {key}: must be {allowed}")
