"""BrokerConfig's typed accessors: generated from the key table, in sync with it, typed as the
keys' types, and the only attribute route to a key's value (no ``__getattr__``)."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest

from weir.config import BROKER_CONFIGS, BrokerConfig, ConfigError, accessors
from weir.config.codegen import EXPLICIT, attribute_name, render

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/weir"}
_PY = {"bool": bool, "int": int, "short": int, "long": int, "double": float, "list": list}


def test_generated_accessors_are_up_to_date() -> None:
    """Regenerate with ``python -m weir.config.codegen`` when this fails."""
    assert Path(accessors.__file__).read_text(encoding="utf-8") == render()


def test_every_key_has_a_typed_property_returning_its_value() -> None:
    cfg = BrokerConfig.from_dict({**BASE, "broker.rack": "r1", "super.users": "User:a"})
    for cdef in BROKER_CONFIGS:
        attr = attribute_name(cdef.name)
        prop = getattr(BrokerConfig, attr)
        assert isinstance(prop, property), cdef.name
        value = getattr(cfg, attr)
        if cdef.name in EXPLICIT:
            continue
        assert value == cfg.get(cdef.name), cdef.name
        hint = typing.get_type_hints(prop.fget, vars(accessors))["return"]
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if value is None:
            assert type(None) in allowed, f"{cdef.name} is None but typed {hint}"
        else:
            assert isinstance(value, _PY.get(cdef.type, str)), cdef.name
            assert any(isinstance(value, typing.get_origin(a) or a) for a in allowed), \
                f"{cdef.name}: {value!r} is not {hint}"


def test_required_and_defaulted_keys_are_not_optional() -> None:
    hints = {a: typing.get_type_hints(getattr(BrokerConfig, a).fget, vars(accessors))["return"]
             for a in ("broker_id", "log_retention_ms", "log_dirs", "broker_rack")}
    assert hints["broker_id"] is int
    assert hints["log_retention_ms"] is int  # resolved through minutes and hours
    assert hints["log_dirs"] == list[str]  # falls back to log.dir
    assert hints["broker_rack"] == str | None


def test_typed_values_follow_the_file_and_derivations() -> None:
    cfg = BrokerConfig.from_dict({**BASE, "log.retention.hours": "2", "log.dir": "/d",
                                  "log.cleaner.io.buffer.load.factor": "0.5",
                                  "inter.broker.listener.name": "plaintext"})
    assert cfg.log_retention_ms == 2 * 3600 * 1000
    assert cfg.log_dirs == ["/d"]
    assert cfg.log_cleaner_io_buffer_load_factor == 0.5
    assert cfg.inter_broker_listener_name == "PLAINTEXT"  # resolved, upper case


def test_no_dynamic_attribute_lookup() -> None:
    assert "__getattr__" not in vars(BrokerConfig)
    cfg = BrokerConfig.from_dict(BASE)
    with pytest.raises(AttributeError):
        _ = cfg.no_such_key  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        cfg.log_segment_bytes = 5  # type: ignore[misc]


def test_bad_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match="log.cleaner.io.buffer.load.factor"):
        BrokerConfig.from_dict({**BASE, "log.cleaner.io.buffer.load.factor": "2"})
    with pytest.raises(ConfigError, match="group.max.size"):
        BrokerConfig.from_dict({**BASE, "group.max.size": "many"})
