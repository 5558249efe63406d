"""The Iceberg REST Catalog handler over a real PyIceberg SQL catalog (SQLite in a temp dir),
without HTTP: the spec's answers, and a clear ErrorModel for every bad request."""

from __future__ import annotations

import json

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from weir.tables.catalog import catalog_settings, default_catalog_properties, load_catalog
from weir.tables.rest_catalog import RestCatalogHandler

SCHEMA = Schema(NestedField(1, "x", LongType(), required=False))


@pytest.fixture
def handler(tmp_path):
    catalog = load_catalog(catalog_settings(default_catalog_properties(tmp_path)))
    catalog.create_namespace("weir")
    catalog.create_table(("weir", "t"), SCHEMA)
    return RestCatalogHandler(catalog)


def call(handler, method, path, body=None, query=None):
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    response = handler.handle(method, path, query or {}, raw)
    return response.status, response.json()


def assert_error(answer, status, kind, *words):
    code, doc = answer
    assert code == status, doc
    assert doc["error"]["type"] == kind and doc["error"]["code"] == status, doc
    for word in words:
        assert word in doc["error"]["message"], doc


def test_config_announces_the_endpoints(handler):
    status, doc = call(handler, "GET", "/v1/config", query={"warehouse": "anything"})
    assert status == 200 and doc["defaults"] == {} and doc["overrides"] == {}
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}" in doc["endpoints"]


def test_namespaces_and_tables(handler):
    assert call(handler, "GET", "/v1/namespaces") == (200, {"namespaces": [["weir"]]})
    assert call(handler, "POST", "/v1/namespaces",
                {"namespace": ["more"], "properties": {"owner": "me"}})[0] == 200
    assert call(handler, "GET", "/v1/namespaces/more")[1]["properties"]["owner"] == "me"
    assert call(handler, "HEAD", "/v1/namespaces/more") == (204, None)
    assert call(handler, "GET", "/v1/namespaces/weir/tables") == (
        200, {"identifiers": [{"namespace": ["weir"], "name": "t"}]})
    status, doc = call(handler, "GET", "/v1/namespaces/weir/tables/t")
    assert status == 200 and doc["metadata-location"].endswith(".metadata.json")
    assert doc["metadata"]["format-version"] == 2
    assert call(handler, "HEAD", "/v1/namespaces/weir/tables/t") == (204, None)
    assert call(handler, "POST", "/v1/tables/rename",
                {"source": {"namespace": ["weir"], "name": "t"},
                 "destination": {"namespace": ["more"], "name": "u"}}) == (204, None)
    assert call(handler, "HEAD", "/v1/namespaces/more/tables/u") == (204, None)
    assert_error(call(handler, "DELETE", "/v1/namespaces/more"), 409,
                 "NamespaceNotEmptyException")
    assert call(handler, "DELETE", "/v1/namespaces/more/tables/u") == (204, None)
    assert call(handler, "DELETE", "/v1/namespaces/more") == (204, None)


def test_missing_things_are_404_with_the_spec_names(handler):
    assert_error(call(handler, "GET", "/v1/namespaces/weir/tables/nope"), 404,
                 "NoSuchTableException", "nope")
    assert call(handler, "HEAD", "/v1/namespaces/weir/tables/nope")[0] == 404
    assert_error(call(handler, "GET", "/v1/namespaces/absent/tables"), 404,
                 "NoSuchNamespaceException", "absent")
    assert_error(call(handler, "HEAD", "/v1/namespaces/absent"), 404,
                 "NoSuchNamespaceException")
    assert_error(call(handler, "POST", "/v1/namespaces/absent/tables",
                      {"name": "x", "schema": json.loads(SCHEMA.model_dump_json())}), 404,
                 "NoSuchNamespaceException")
    # a commit to a table that is not there, without assert-create
    assert_error(call(handler, "POST", "/v1/namespaces/weir/tables/nope",
                      {"requirements": [], "updates": []}), 404, "NoSuchTableException")
    assert_error(call(handler, "GET", "/v2/config"), 404, "NoSuchEndpointException")
    assert_error(call(handler, "GET", "/v1/namespaces/weir/views"), 404,
                 "NoSuchEndpointException")
    assert_error(call(handler, "PUT", "/v1/namespaces"), 405, "MethodNotAllowed", "GET, POST")


def test_conflicts_are_409(handler):
    assert_error(call(handler, "POST", "/v1/namespaces", {"namespace": ["weir"]}), 409,
                 "AlreadyExistsException")
    assert_error(call(handler, "POST", "/v1/namespaces/weir/tables",
                      {"name": "t", "schema": json.loads(SCHEMA.model_dump_json())}), 409,
                 "AlreadyExistsException")
    # a requirement the table does not meet: the table's uuid is another one
    assert_error(call(handler, "POST", "/v1/namespaces/weir/tables/t", {
        "requirements": [{"type": "assert-table-uuid",
                          "uuid": "00000000-0000-0000-0000-000000000000"}],
        "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}),
        409, "CommitFailedException")
    # assert-ref-snapshot-id: main must not exist yet (no snapshot), and does not: accepted
    status, doc = call(handler, "POST", "/v1/namespaces/weir/tables/t", {
        "identifier": {"namespace": ["weir"], "name": "t"},
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                          "snapshot-id": None}],
        "updates": [{"action": "set-properties", "updates": {"a": "b"}}]})
    assert status == 200 and doc["metadata"]["properties"]["a"] == "b", doc
    assert call(handler, "GET", "/v1/namespaces/weir/tables/t")[1]["metadata-location"] == \
        doc["metadata-location"]


@pytest.mark.parametrize("method,path,body,words", [
    ("POST", "/v1/namespaces", b"{not json", ["not JSON"]),
    ("POST", "/v1/namespaces", b"[1, 2]", ["not a JSON object"]),
    ("POST", "/v1/namespaces", {"namespace": "weir"}, ["namespace"]),
    ("POST", "/v1/namespaces", {"namespace": ["a.b"]}, ["without dots"]),
    ("POST", "/v1/namespaces", {"namespace": []}, ["invalid namespace"]),
    ("GET", "/v1/namespaces/%1F/tables", None, ["invalid namespace"]),
    ("POST", "/v1/namespaces/weir/tables", {"name": "u"}, ["schema"]),
    ("POST", "/v1/namespaces/weir/tables", {"name": "", "schema": {}}, []),
    ("POST", "/v1/namespaces/weir/tables/t", {"updates": [{"action": "no-such-action"}]},
     ["CommitRequest"]),
    ("POST", "/v1/namespaces/weir/tables/t",
     {"updates": [{"action": "set-current-schema", "schema-id": 42}]}, ["42"]),
    ("POST", "/v1/namespaces/weir/tables/t",
     {"identifier": {"namespace": ["weir"], "name": "other"}}, ["weir.other"]),
    ("POST", "/v1/namespaces/weir/properties", {"removals": ["a"], "updates": {"a": "b"}},
     ["both removed and updated"]),
    ("POST", "/v1/tables/rename", {"source": {"namespace": ["weir"], "name": "t"}},
     ["destination"]),
])
def test_bad_requests_are_400_and_change_nothing(handler, method, path, body, words):
    before = call(handler, "GET", "/v1/namespaces/weir/tables/t")
    assert_error(call(handler, method, path, body), 400, "BadRequestException", *words)
    assert call(handler, "GET", "/v1/namespaces/weir/tables/t") == before
    assert call(handler, "GET", "/v1/namespaces")[1] == {"namespaces": [["weir"]]}


@pytest.mark.parametrize("args,words", [
    (["--catalog-uri", "http://127.0.0.1:8181", "--warehouse", "/w"], ["an SQLAlchemy URL"]),
    (["--catalog-uri", "sqlite:////tmp/x.db"], ["needs --warehouse"]),
    (["--warehouse", "/w"], ["goes with --catalog-uri"]),
    (["--port", "70000"], ["not a port"]),
])
def test_catalog_server_refuses_bad_arguments(tmp_path, capsys, args, words):
    from weir.cli.main import main

    assert main(["table", "catalog-server", "--data-dir", str(tmp_path), *args]) == 1
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert "Traceback" not in err


def test_catalog_server_on_a_busy_port_says_so(tmp_path, capsys):
    import socket

    from weir.cli.main import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["table", "catalog-server", "--data-dir", str(tmp_path),
                     "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "Traceback" not in err, err


def test_a_rest_catalog_that_never_answers_times_out(monkeypatch):
    """A broker's translator worker must not wait for ever on a hung catalog."""
    import socket
    import time

    import requests

    from weir.tables import catalog
    from weir.tables.settings import CatalogSettings

    monkeypatch.setattr(catalog, "REST_TIMEOUT_S", (2.0, 0.5))
    with socket.socket() as silent:  # connections queue in the backlog, nothing answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(requests.exceptions.Timeout):
            catalog.load_catalog(CatalogSettings("rest", uri))
        assert time.monotonic() - started < 10


def test_storage_failures_are_500_and_the_handler_goes_on(handler, monkeypatch):
    """The commit's metadata file cannot be written (a disk full, injected): the spec's
    CommitStateUnknownException, so the client does not retry blindly; the table's metadata
    unreadable: ServiceFailureException.  Both logged, and the next request is served."""
    import shutil
    from pathlib import Path

    commit = {"updates": [{"action": "set-properties", "updates": {"a": "b"}}]}

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")
    with monkeypatch.context() as patch:
        patch.setattr(handler.catalog, "_write_metadata", disk_full)
        assert_error(call(handler, "POST", "/v1/namespaces/weir/tables/t", commit), 500,
                     "CommitStateUnknownException", "No space left on device")

    table = handler.catalog.load_table(("weir", "t"))
    metadata_dir = Path(table.location().removeprefix("file://")) / "metadata"
    hidden = metadata_dir.with_name("metadata.away")
    metadata_dir.rename(hidden)
    metadata_dir.write_text("not a directory")
    try:
        assert_error(call(handler, "GET", "/v1/namespaces/weir/tables/t"), 500,
                     "ServiceFailureException", "Not a directory")
    finally:
        metadata_dir.unlink()
        shutil.move(hidden, metadata_dir)
    status, doc = call(handler, "POST", "/v1/namespaces/weir/tables/t", commit)
    assert status == 200 and doc["metadata"]["properties"]["a"] == "b", doc
