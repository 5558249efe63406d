"""The topic tables' catalog settings, without PyIceberg (the broker, ``weir up`` and the
CLI read them; :mod:`weir.tables.catalog` re-exports them beside the PyIceberg parts)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CATALOG_KEYS", "CATALOG_TYPE", "CATALOG_TYPES", "CATALOG_URI", "DEFAULT_NAMESPACE",
           "NAMESPACE", "WAREHOUSE", "CatalogSettings", "catalog_settings",
           "default_catalog_properties"]

CATALOG_TYPE = "weir.iceberg.catalog.type"
CATALOG_URI = "weir.iceberg.catalog.uri"
WAREHOUSE = "weir.iceberg.warehouse"
NAMESPACE = "weir.iceberg.namespace"
CATALOG_TYPES = ("sql", "rest")
DEFAULT_NAMESPACE = "weir"

CATALOG_KEYS = (CATALOG_TYPE, CATALOG_URI, WAREHOUSE, NAMESPACE)


@dataclass(frozen=True)
class CatalogSettings:
    """Where the topic tables are: the catalog, its warehouse and the namespace."""

    type: str = "sql"
    uri: str | None = None
    warehouse: str | None = None
    namespace: str = DEFAULT_NAMESPACE

    def describe(self) -> str:
        return f"{self.type} catalog {self.uri or '(no uri)'}, warehouse " \
               f"{self.warehouse or '(catalog default)'}"


def catalog_settings(configs: Mapping[str, str | None]) -> CatalogSettings:
    """The catalog settings in broker configs (``server.properties``, or a DescribeConfigs
    answer as a mapping).  ValueError names a key whose value is unusable."""
    ctype = (configs.get(CATALOG_TYPE) or "sql").strip().lower()
    if ctype not in CATALOG_TYPES:
        raise ValueError(f"{CATALOG_TYPE}={ctype!r}: must be one of {', '.join(CATALOG_TYPES)}")
    uri = (configs.get(CATALOG_URI) or "").strip() or None
    warehouse = (configs.get(WAREHOUSE) or "").strip() or None
    namespace = (configs.get(NAMESPACE) or DEFAULT_NAMESPACE).strip()
    if not namespace or "." in namespace:
        raise ValueError(f"{NAMESPACE}={namespace!r}: a non-empty name without dots")
    return CatalogSettings(ctype, uri, warehouse, namespace)


def default_catalog_properties(data_dir: Path) -> dict[str, str]:
    """The embedded default of ``weir up``: an SQL catalog on SQLite in
    ``<data-dir>/iceberg/catalog.db``, warehouse ``<data-dir>/iceberg/warehouse``."""
    root = Path(data_dir).absolute() / "iceberg"
    return {CATALOG_TYPE: "sql", CATALOG_URI: f"sqlite:///{root / 'catalog.db'}",
            WAREHOUSE: str(root / "warehouse"), NAMESPACE: DEFAULT_NAMESPACE}
