"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule> required key="value" ...;``.

Only the module name and its options are read (the control flag must be ``required``);
the broker takes PLAIN users from ``user_<name>="<password>"`` options and its own
inter-broker identity from ``username``/``password``, as Kafka's login modules do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_MODULE = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\s*")
_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))\s*')

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class JaasConfig:
    module: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PLAIN's ``user_<name>="<password>"`` options."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse one login module entry; ValueError with a description when malformed."""
    match = _MODULE.match(text)
    if match is None:
        raise ValueError("expected '<LoginModule> required key=\"value\" ...;'")
    if match.group(2) != "required":
        raise ValueError(f"control flag {match.group(2)!r} is not supported (use required)")
    pos = match.end()
    options: dict[str, str] = {}
    while True:
        rest = text[pos:].strip()
        if rest == ";":
            break
        if not rest:
            raise ValueError("missing ';' at the end")
        opt = _OPTION.match(text, pos)
        if opt is None:
            raise ValueError(f"cannot parse option at {text[pos:pos + 30]!r}")
        value = opt.group(2)
        value = re.sub(r"\\(.)", r"\1", value) if value is not None else opt.group(3)
        options[opt.group(1)] = value
        pos = opt.end()
    return JaasConfig(match.group(1), options)


def parse_jaas_config_entries(text: str) -> list[JaasConfig]:
    """Several login module entries, each ending with ';' (a JAAS file section's body)."""
    entries = []
    rest = text.strip()
    while rest:
        match = _MODULE.match(rest)
        if match is None:
            raise ValueError(f"expected a login module at {rest[:40]!r}")
        end = match.end()
        while True:  # the entry ends at the first ';' outside quotes
            opt = _OPTION.match(rest, end)
            if opt is None:
                break
            end = opt.end()
        if not rest[end:].lstrip().startswith(";"):
            raise ValueError(f"missing ';' after {rest[:40]!r}")
        semicolon = rest.index(";", end)
        entries.append(parse_jaas_config(rest[:semicolon + 1]))
        rest = rest[semicolon + 1:].strip()
    return entries


_SECTION = re.compile(r"([\w.\-]+)\s*\{(.*?)\}\s*;", re.DOTALL)


def parse_jaas_file(text: str) -> dict[str, list[JaasConfig]]:
    """A JAAS file (Kafka's ``java.security.auth.login.config``): section name → entries,
    e.g. ``KafkaServer`` and ``sasl_ssl.KafkaServer`` (ValueError when malformed)."""
    # Comments on lines of their own (inside a quoted value // is part of the value).
    text = re.sub(r"^\s*(//[^\n]*|/\*.*?\*/)", "", text, flags=re.DOTALL | re.MULTILINE)
    sections: dict[str, list[JaasConfig]] = {}
    pos = 0
    for match in _SECTION.finditer(text):
        if text[pos:match.start()].strip():
            raise ValueError(f"unexpected text {text[pos:match.start()].strip()[:40]!r}")
        sections[match.group(1)] = parse_jaas_config_entries(match.group(2))
        pos = match.end()
    if text[pos:].strip():
        raise ValueError(f"unexpected text {text[pos:].strip()[:40]!r}")
    return sections


def client_jaas_config(mechanism: str, username: str, password: str) -> str:
    """The ``sasl.jaas.config`` a Java client uses for these credentials."""
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    return f'{module} required username="{_quote(username)}" password="{_quote(password)}";'


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
