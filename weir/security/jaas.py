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


def client_jaas_config(mechanism: str, username: str, password: str) -> str:
    """The ``sasl.jaas.config`` a Java client uses for these credentials."""
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    return f'{module} required username="{_quote(username)}" password="{_quote(password)}";'


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
