"""Java ``.properties`` files: ``server.properties``, ``client.properties``, ``weir up --set``.

Reading is javaproperties' (``Properties.load``'s grammar exactly: ``k=v``, ``k: v``, ``k v``,
``#``/``!`` comments, backslash continuations, ``\\uXXXX`` and surrogate pairs); a malformed
``\\u`` escape is a :class:`ConfigError`, as Java's ``Malformed \\uxxxx encoding``.

Writing edits a file in place through javaproperties' element parser, so that comments,
blank lines, order and the keys not given survive; each given key is rewritten where it first
appears (later duplicates are dropped) and new keys are appended.  The lines written are our
own: javaproperties' writer escapes ``=`` and ``:`` inside values and every non-ASCII
character (as Java's ``Properties.store``), which would turn ``zookeeper.connect=zk:2181/weir``
and a ``sasl.jaas.config`` into hard-to-read text; Java's loader does not need those escapes,
so only what it needs is escaped (separators and spaces in keys, a value's leading space,
backslashes and control characters).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import javaproperties

from weir.config.validators import ConfigError, format_value

__all__ = ["format_property", "parse_properties", "read_properties", "write_properties"]

_CONTROL = {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}


def _elements(text: str) -> list[javaproperties.PropertiesElement]:
    try:
        return list(javaproperties.parse(text))
    except javaproperties.InvalidUEscapeError as exc:
        raise ConfigError(f"Malformed \\uXXXX escape in properties: {exc}") from None


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text; a key given twice keeps its last value (as Java)."""
    return {el.key: el.value for el in _elements(text)
            if isinstance(el, javaproperties.KeyValue)}


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"))


def _escape(text: str, is_key: bool) -> str:
    out = []
    for idx, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in _CONTROL:
            out.append("\\" + _CONTROL[ch])
        elif ch in "=:#!" and is_key or ch == " " and (is_key or idx == 0):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def format_property(key: str, value: Any) -> str:
    """One ``key=value`` line (no newline); ``value`` in Kafka's string form."""
    return f"{_escape(key, True)}={_escape(format_value(value) or '', False)}"


def write_properties(path: str | os.PathLike[str], props: Mapping[str, Any],
                     header: str | None = None) -> None:
    """Set ``props`` in a properties file, creating it (with ``header`` as comment lines)
    if needed.  The file is replaced atomically; see the module docstring for what is kept."""
    target = Path(path)
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    if not old and header:
        old = "".join(f"# {line}\n" for line in header.splitlines())
    pending = dict(props)
    out: list[str] = []
    for element in _elements(old):
        if isinstance(element, javaproperties.KeyValue) and element.key in props:
            if element.key in pending:
                out.append(format_property(element.key, pending.pop(element.key)) + "\n")
            continue
        source = element.source
        out.append(source if source.endswith(("\n", "\r")) else source + "\n")
    out.extend(format_property(k, v) + "\n" for k, v in pending.items())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("".join(out), encoding="utf-8")
    os.replace(tmp, target)
