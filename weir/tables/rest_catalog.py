"""The Apache Iceberg REST Catalog API (the project's ``open-api/rest-catalog-open-api.yaml``)
over any PyIceberg catalog: Weir's embedded SQL catalog, so that Trino, Spark, DuckDB and
PyIceberg attach to a cluster's topic tables by REST (``weir table catalog-server``,
docs/tables.md), and brokers can use ``weir.iceberg.catalog.type=rest``.

:class:`RestCatalogHandler` is the server without the HTTP: a request (method, raw path,
query, body) in, a :class:`RestResponse` (status, JSON body) out.  It is synchronous and
blocking (it reads and writes the catalog and its metadata files); the asyncio shell,
:mod:`weir.tables.rest_server`, runs it on one thread off the event loop.

The metadata logic is PyIceberg's, not re-implemented: requests and responses are its models
(``CreateTableRequest``, ``CommitTableRequest``'s ``TableRequirement`` and
``TableUpdate`` unions, ``TableResponse``, ``CommitTableResponse``) and every operation is the
catalog's own (``commit_table`` checks the requirements against the current metadata, writes
the new metadata file and swaps the pointer conditionally, as Iceberg's JDBC catalog does).

Errors are the spec's ``ErrorModel`` (``{"error": {"message", "type", "code"}}``) with the
type names of Iceberg's Java exceptions, as its ``RESTCatalogAdapter`` reports them:
404 ``NoSuchTableException``/``NoSuchNamespaceException``, 409 ``AlreadyExistsException``,
``CommitFailedException``, ``NamespaceNotEmptyException``, 400 ``BadRequestException`` (a
body that is not the request's JSON, an invalid update), 500 ``CommitStateUnknownException``
(a commit that failed in an unknown state) or ``ServiceFailureException``.  A bad request
is answered, never raised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pydantic
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import CreateTableRequest, RegisterTableRequest, TableResponse
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchIdentifierError,
    NoSuchNamespaceError,
    NoSuchPropertyException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import TableIdentifier
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AssertCreate, TableRequirement, TableUpdate
from pyiceberg.typedef import IcebergBaseModel, Identifier

__all__ = ["ENDPOINTS", "NAMESPACE_SEPARATOR", "RestCatalogHandler", "RestResponse"]

log = logging.getLogger(__name__)

NAMESPACE_SEPARATOR = "\x1f"
"""Between the levels of a namespace in a path (the spec's default, ``%1F`` encoded)."""

ENDPOINTS = (
    "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces", "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}", "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties", "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables", "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register", "POST /v1/{prefix}/tables/rename",
)
"""What ``GET /v1/config`` announces (the spec's ``endpoints``): no views, no server-side
scan planning, no multi-table transactions."""


@dataclass(frozen=True)
class RestResponse:
    """An answer: the HTTP status and the JSON body (None: no content)."""

    status: int
    body: bytes | None = None

    def json(self) -> Any:
        return None if self.body is None else json.loads(self.body)


def _json(status: int, doc: Any) -> RestResponse:
    return RestResponse(status, json.dumps(doc).encode())


class BadRequest(Exception):
    """The request is not one the API accepts (answered 400)."""


class NotFound(Exception):
    """No such route: 404 ``NoSuchEndpointException``, or 405 for a method a known path does
    not take."""

    def __init__(self, message: str, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


class CommitStateUnknown(Exception):
    """A commit failed after the requirements were checked (writing the metadata file or
    updating the catalog): it may or may not have taken effect (answered 500, the spec's
    ``CommitStateUnknownException``, so that the client does not retry blindly)."""


class CreateNamespaceRequest(IcebergBaseModel):
    namespace: tuple[str, ...]
    properties: dict[str, str] = pydantic.Field(default_factory=dict)


class UpdateNamespacePropertiesRequest(IcebergBaseModel):
    removals: list[str] = pydantic.Field(default_factory=list)
    updates: dict[str, str] = pydantic.Field(default_factory=dict)


class RenameTableRequest(IcebergBaseModel):
    source: TableIdentifier
    destination: TableIdentifier


class CommitRequest(IcebergBaseModel):
    """The spec's ``CommitTableRequest``: PyIceberg's, with the identifier optional (the path
    names the table; Java's ``RESTTableOperations`` leaves it out)."""

    identifier: TableIdentifier | None = None
    requirements: tuple[TableRequirement, ...] = pydantic.Field(default_factory=tuple)
    updates: tuple[TableUpdate, ...] = pydantic.Field(default_factory=tuple)


class _Named:
    """What ``Catalog.commit_table`` needs of its ``table`` argument: the identifier (the
    catalog loads the current metadata itself, or creates the table for ``assert-create``)."""

    def __init__(self, identifier: Identifier) -> None:
        self._identifier = identifier

    def name(self) -> Identifier:
        return self._identifier


def _error(status: int, kind: str, message: str) -> RestResponse:
    return _json(status, {"error": {"message": message, "type": kind, "code": status}})


def _namespace(segment: str) -> Identifier:
    parts = tuple(unquote(segment).split(NAMESPACE_SEPARATOR))
    _check_namespace(parts)
    return parts


def _check_namespace(parts: tuple[str, ...]) -> None:
    if not parts or any(not p or "." in p for p in parts):
        raise BadRequest(f"invalid namespace {list(parts)}: levels must be non-empty names "
                         f"without dots")


def _table_name(segment: str) -> str:
    name = unquote(segment)
    if not name:
        raise BadRequest("empty table name")
    return name


def _parse(model: type[IcebergBaseModel], body: bytes,
           optional: tuple[str, ...] = ()) -> Any:
    """``body`` as ``model``; ``optional``: fields the spec makes optional that the model
    requires (PyIceberg's client models leave out what is None, never read it back)."""
    try:
        doc = json.loads(body or b"null")
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadRequest(f"the body is not a JSON object of a {model.__name__}")
    for name in optional:
        doc.setdefault(name, None)
    try:
        return model.model_validate(doc)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise BadRequest(f"not a {model.__name__}: {problems}") from None


def _identifier(identifier: TableIdentifier) -> Identifier:
    namespace = tuple(identifier.namespace.root)
    _check_namespace(namespace)
    if not identifier.name:
        raise BadRequest("empty table name")
    return (*namespace, identifier.name)


def _make_local_dirs(location: str) -> None:
    """A table in a local warehouse gets its ``metadata`` and ``data`` directories at creation:
    some clients (DuckDB) write files there without making directories, as in object
    storage, where there are none."""
    if location.startswith(("file://", "/")):
        root = Path(unquote(location.removeprefix("file://")))
        for sub in ("metadata", "data"):
            (root / sub).mkdir(parents=True, exist_ok=True)


class RestCatalogHandler:
    """The REST Catalog API over ``catalog`` (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def handle(self, method: str, raw_path: str, query: Mapping[str, str],
               body: bytes) -> RestResponse:
        """Answer one request; ``raw_path`` as sent (percent-encoded)."""
        try:
            return self._route(method.upper(), raw_path, query, body)
        except BadRequest as exc:
            return _error(400, "BadRequestException", str(exc))
        except NotFound as exc:
            kind = "NoSuchEndpointException" if exc.status == 404 else "MethodNotAllowed"
            return _error(exc.status, kind, str(exc))
        except NoSuchTableError as exc:
            return _error(404, "NoSuchTableException", str(exc))
        except (NoSuchNamespaceError, NoSuchIdentifierError) as exc:
            return _error(404, "NoSuchNamespaceException", str(exc))
        except (NamespaceAlreadyExistsError, TableAlreadyExistsError) as exc:
            return _error(409, "AlreadyExistsException", str(exc))
        except NamespaceNotEmptyError as exc:
            return _error(409, "NamespaceNotEmptyException", str(exc))
        except CommitFailedException as exc:
            return _error(409, "CommitFailedException", str(exc))
        except NotImplementedError as exc:
            return _error(501, "UnsupportedOperationException", str(exc) or "not supported")
        except (IcebergValidationError, NoSuchPropertyException, ValueError, KeyError,
                pydantic.ValidationError) as exc:
            # an update the metadata rejects (an unknown schema id, a bad property): Iceberg's
            # ValidationException and IllegalArgumentException are 400s too
            return _error(400, "BadRequestException", f"{type(exc).__name__}: {exc}")
        except CommitStateUnknown as exc:
            log.error("%s %s: commit state unknown: %s", method, raw_path, exc,
                      exc_info=exc.__cause__)
            return _error(500, "CommitStateUnknownException", str(exc))
        except Exception as exc:  # answered 500: the server keeps serving
            log.exception("%s %s failed", method, raw_path)
            return _error(500, "ServiceFailureException", f"{type(exc).__name__}: {exc}")

    # -- routing ---------------------------------------------------------------------------

    def _route(self, method: str, raw_path: str, query: Mapping[str, str],
               body: bytes) -> RestResponse:
        parts = raw_path.strip("/").split("/")
        if parts[:1] != ["v1"]:
            raise NotFound(f"no such endpoint: {raw_path} (the API is under /v1)")
        route = parts[1:]
        allowed: tuple[str, ...]
        match route:
            case ["config"]:
                allowed = ("GET",)
                if method == "GET":
                    return _json(200, {"defaults": {}, "overrides": {},
                                              "endpoints": list(ENDPOINTS)})
            case ["namespaces"]:
                allowed = ("GET", "POST")
                if method == "GET":
                    return self._list_namespaces(query)
                if method == "POST":
                    return self._create_namespace(body)
            case ["namespaces", ns]:
                allowed = ("GET", "HEAD", "DELETE")
                if method in allowed:
                    return self._namespace(method, _namespace(ns))
            case ["namespaces", ns, "properties"]:
                allowed = ("POST",)
                if method == "POST":
                    return self._update_namespace(_namespace(ns), body)
            case ["namespaces", ns, "tables"]:
                allowed = ("GET", "POST")
                if method == "GET":
                    return self._list_tables(_namespace(ns))
                if method == "POST":
                    return self._create_table(_namespace(ns), body)
            case ["namespaces", ns, "register"]:
                allowed = ("POST",)
                if method == "POST":
                    return self._register_table(_namespace(ns), body)
            case ["namespaces", ns, "tables", table]:
                allowed = ("GET", "HEAD", "POST", "DELETE")
                if method in allowed:
                    return self._table(method, (*_namespace(ns), _table_name(table)), query,
                                       body)
            case ["tables", "rename"]:
                allowed = ("POST",)
                if method == "POST":
                    return self._rename_table(body)
            case _:
                raise NotFound(f"no such endpoint: {method} {raw_path}")
        raise NotFound(f"{method} is not allowed on {raw_path} (allowed: {', '.join(allowed)})",
                       status=405)

    # -- namespaces ------------------------------------------------------------------------

    def _list_namespaces(self, query: Mapping[str, str]) -> RestResponse:
        parent = _namespace(query["parent"]) if query.get("parent") else ()
        if parent and not self.catalog.namespace_exists(parent):
            raise NoSuchNamespaceError(f"namespace does not exist: {'.'.join(parent)}")
        namespaces = self.catalog.list_namespaces(parent)
        return _json(200, {"namespaces": [list(n) for n in namespaces]})

    def _create_namespace(self, body: bytes) -> RestResponse:
        request = _parse(CreateNamespaceRequest, body)
        _check_namespace(request.namespace)
        self.catalog.create_namespace(request.namespace, request.properties)
        return _json(200, {"namespace": list(request.namespace),
                                  "properties": request.properties})

    def _namespace(self, method: str, namespace: Identifier) -> RestResponse:
        if method == "DELETE":
            self.catalog.drop_namespace(namespace)
            return RestResponse(204)
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"namespace does not exist: {'.'.join(namespace)}")
        if method == "HEAD":
            return RestResponse(204)
        properties = self.catalog.load_namespace_properties(namespace)
        return _json(200, {"namespace": list(namespace), "properties": properties})

    def _update_namespace(self, namespace: Identifier, body: bytes) -> RestResponse:
        request = _parse(UpdateNamespacePropertiesRequest, body)
        if set(request.removals) & set(request.updates):
            raise BadRequest("a property both removed and updated: "
                             f"{sorted(set(request.removals) & set(request.updates))}")
        summary = self.catalog.update_namespace_properties(
            namespace, set(request.removals), request.updates)
        return _json(200, {"removed": summary.removed, "updated": summary.updated,
                                  "missing": summary.missing})

    # -- tables ----------------------------------------------------------------------------

    def _list_tables(self, namespace: Identifier) -> RestResponse:
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"namespace does not exist: {'.'.join(namespace)}")
        tables = self.catalog.list_tables(namespace)
        return _json(200, {"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]}
                                                  for t in tables]})

    def _create_table(self, namespace: Identifier, body: bytes) -> RestResponse:
        request = _parse(CreateTableRequest, body,
                         optional=("location", "partition-spec", "write-order"))
        identifier = (*namespace, _table_name(request.name))
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"namespace does not exist: {'.'.join(namespace)}")
        spec = request.partition_spec or UNPARTITIONED_PARTITION_SPEC
        order = request.write_order or UNSORTED_SORT_ORDER
        if request.stage_create:
            # The table's first metadata, not committed: the client commits it with an
            # assert-create requirement (a create transaction).
            if self.catalog.table_exists(identifier):
                raise TableAlreadyExistsError(f"table already exists: {'.'.join(identifier)}")
            staged = self.catalog._create_staged_table(  # PyIceberg MetastoreCatalog
                identifier, request.table_schema, request.location, spec, order,
                request.properties)
            _make_local_dirs(staged.metadata.location)
            return self._table_response(None, staged.metadata)
        table = self.catalog.create_table(identifier, request.table_schema, request.location,
                                          spec, order, request.properties)
        _make_local_dirs(table.metadata.location)
        return self._table_response(table.metadata_location, table.metadata)

    def _register_table(self, namespace: Identifier, body: bytes) -> RestResponse:
        request = _parse(RegisterTableRequest, body)
        identifier = (*namespace, _table_name(request.name))
        if request.overwrite:
            table = self.catalog.register_table(identifier, request.metadata_location,
                                                overwrite=True)
        else:
            table = self.catalog.register_table(identifier, request.metadata_location)
        return self._table_response(table.metadata_location, table.metadata)

    def _table(self, method: str, identifier: Identifier, query: Mapping[str, str],
               body: bytes) -> RestResponse:
        if method == "DELETE":
            purge = query.get("purgeRequested", "false").lower() == "true"
            (self.catalog.purge_table if purge else self.catalog.drop_table)(identifier)
            return RestResponse(204)
        if method == "POST":
            return self._commit(identifier, body)
        table = self.catalog.load_table(identifier)
        if method == "HEAD":
            return RestResponse(204)
        return self._table_response(table.metadata_location, table.metadata)

    def _commit(self, identifier: Identifier, body: bytes) -> RestResponse:
        request = _parse(CommitRequest, body)
        if request.identifier is not None and request.identifier.name \
                and _identifier(request.identifier) != identifier:
            raise BadRequest(f"the body names table {'.'.join(_identifier(request.identifier))}"
                             f", the path {'.'.join(identifier)}")
        creating = any(isinstance(r, AssertCreate) for r in request.requirements)
        if not creating and not self.catalog.table_exists(identifier):
            raise NoSuchTableError(f"table does not exist: {'.'.join(identifier)}")
        try:
            response = self.catalog.commit_table(_Named(identifier),  # type: ignore[arg-type]
                                                 request.requirements, request.updates)
        except (CommitFailedException, NoSuchTableError, TableAlreadyExistsError,
                IcebergValidationError, ValueError, KeyError, NotImplementedError):
            raise  # refused before anything was written: answered as such
        except Exception as exc:
            raise CommitStateUnknown(f"{type(exc).__name__}: {exc}") from exc
        return RestResponse(200, response.model_dump_json().encode())

    def _rename_table(self, body: bytes) -> RestResponse:
        request = _parse(RenameTableRequest, body)
        self.catalog.rename_table(_identifier(request.source), _identifier(request.destination))
        return RestResponse(204)

    @staticmethod
    def _table_response(metadata_location: str | None, metadata: Any) -> RestResponse:
        response = TableResponse(metadata_location=metadata_location, metadata=metadata,
                                 config={})
        return RestResponse(200, response.model_dump_json().encode())
