"""The console without a cluster: the pure shaping functions (rates, partition flags, group
lag, metrics summary, endpoint discovery) and the HTTP API against a scripted reader and
admin — the actions answer 403 unless --allow-actions, bad bodies 400; a cluster that
cannot be reached is an error on the page, never a dead server."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from weir.common import TopicPartition
from weir.config import write_properties
from weir.console import collect
from weir.console.server import ConsoleState, _controller_view, make_app, with_down_brokers
from weir.server.metrics import MetricsSnapshot, PartitionSnapshot, render

# -- pure functions -----------------------------------------------------------------------------


def test_rate_series_sums_brokers_and_survives_restarts():
    history = [
        (10.0, {1: {"bytesin": 100, "isrshrinks": 0, "looplagsum": 5, "looplagcount": 10},
                2: {"bytesin": 50}}),
        (12.0, {1: {"bytesin": 300, "isrshrinks": 2, "looplagsum": 25, "looplagcount": 20},
                2: {"bytesin": 150}}),
        (14.0, {1: {"bytesin": 40, "isrshrinks": 2, "looplagsum": 25, "looplagcount": 20}}),
    ]
    out = collect.rate_series(history)
    assert out["t"] == [12.0, 14.0]
    assert out["bytesin"] == [150.0, 20.0]  # (200 + 100) / 2; then broker 1 restarted: 40 / 2
    assert out["isrshrinks"] == [1.0, 0.0]
    assert out["loop_lag_ms"] == {"1": [2.0, None], "2": [None, None]}
    assert collect.rate_series([]) == {"t": [], **{k: [] for k in collect.RATE_SERIES},
                                       "loop_lag_ms": {}}


def test_partition_flags():
    row = collect.partition_row("t", 0, 1, [1, 2, 3], [1, 2], live=[1, 2, 3])
    assert row["under_replicated"] and not row["offline"]
    assert collect.partition_row("t", 0, -1, [1], [1], live=[2])["offline"]
    assert collect.partition_row("t", 0, 4, [4], [4], live=[1])["offline"]  # leader gone
    healthy = collect.partition_row("t", 1, 2, [2, 1], [1, 2], live=[1, 2])
    assert not healthy["under_replicated"] and not healthy["offline"]


def test_topic_rows_from_metadata():
    part = lambda i, leader, replicas, isr: SimpleNamespace(
        partition_index=i, leader_id=leader, replica_nodes=replicas, isr_nodes=isr)
    md = SimpleNamespace(brokers=[SimpleNamespace(node_id=1), SimpleNamespace(node_id=2)],
                         topics=[
        SimpleNamespace(name="b", error_code=0, is_internal=False,
                        partitions=[part(1, 2, [2, 1], [2]), part(0, 1, [1, 2], [1, 2])]),
        SimpleNamespace(name="__consumer_offsets", error_code=0, is_internal=True,
                        partitions=[part(0, -1, [3], [])]),
        SimpleNamespace(name="gone", error_code=3, is_internal=False, partitions=[]),
    ])
    rows = collect.topic_rows(md)
    assert [t["name"] for t in rows] == ["__consumer_offsets", "b", "gone"]
    assert rows[0]["internal"] and rows[0]["offline"] == 1
    assert [p["partition"] for p in rows[1]["partitions"]] == [0, 1]
    assert rows[1]["under_replicated"] == 1 and rows[1]["offline"] == 0
    assert rows[2]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_group_lag_rows():
    rows = collect.group_lag_rows({("t", 0): 3, ("t", 1): 5}, {("t", 0): 10},
                                  {("t", 1): "client-1", ("t", 2): "client-2"})
    assert [(r["partition"], r["lag"], r["member"]) for r in rows] == [
        (0, 7, None), (1, None, "client-1"), (2, None, "client-2")]


def test_broker_metrics_reads_weir_exposition():
    text = render(MetricsSnapshot(
        partitions=[PartitionSnapshot(TopicPartition("a", 0), True, 1, 3, 2, 2, 0, 5, 10)],
        bytes_in=42))
    m = collect.broker_metrics(text)
    assert m["under_replicated"] == 1 and m["leaders"] == 1 and m["bytesin"] == 42
    assert "looplagcount" not in m  # no lag histogram in a bare snapshot


def test_endpoints_from_a_local_cluster_and_the_command_line(tmp_path):
    configs = {}
    for broker_id, port in ((1, "9404"), (2, "0"), (3, None)):
        path = tmp_path / f"broker-{broker_id}" / "server.properties"
        path.parent.mkdir()
        write_properties(path, {"broker.id": str(broker_id),
                                **({"metrics.http.port": port} if port else {})})
        configs[broker_id] = path
    (tmp_path / "cluster.json").write_text(json.dumps({"brokers": [
        {"id": i, "host": "127.0.0.1", "port": 9092, "config": str(p)}
        for i, p in configs.items()]}))
    assert collect.endpoints_from_data_dir(tmp_path) == {1: "http://127.0.0.1:9404"}
    assert collect.parse_endpoint("2=http://h:1/metrics") == (2, "http://h:1")
    with pytest.raises(ValueError):
        collect.parse_endpoint("x=http://h:1")


def test_brokers_missing_from_metadata_are_shown_down():
    known: dict = {}
    live = [{"id": 1, "host": "h", "port": 1}, {"id": 2, "host": "h", "port": 2}]
    assert [b["down"] for b in with_down_brokers(live, known)] == [False, False]
    rows = with_down_brokers(live[:1], known)
    assert [(b["id"], b["down"]) for b in rows] == [(1, False), (2, True)]


def test_controller_view_prefers_zookeeper_and_the_newest_controller_report():
    old = {"broker_id": 1, "active": True, "epoch": 3, "event_queue_size": 9,
           "state_changes": [{"message": "a"}]}
    new = {"broker_id": 2, "active": True, "epoch": 4, "event_queue_size": 1,
           "current_event": "BrokerChange", "events_processed": 7,
           "state_changes": [{"message": "a"}, {"message": "b"}]}
    view = _controller_view(5, None, [old, new])
    assert (view["id"], view["epoch"], view["event_queue_size"]) == (2, 4, 1)
    assert [c["message"] for c in view["state_changes"]] == ["b", "a"]  # newest first
    zk = {"controller_id": 2, "epoch": 5, "registered": [1, 2]}
    view = _controller_view(5, zk, [new])
    assert (view["id"], view["epoch"], view["source"]) == (2, 5, "zookeeper")
    bare = _controller_view(3, {"error": "connection lost"}, [])
    assert bare["id"] == 3 and bare["zookeeper_error"] == "connection lost"
    assert bare["source"] == "metadata" and bare["state_changes"] == []


# -- the HTTP API --------------------------------------------------------------------------------


class ScriptedAdmin:
    bootstrap = "127.0.0.1:1"

    def __init__(self) -> None:
        self.sent: list = []

    async def to_controller(self, payload):
        self.sent.append(payload)
        return SimpleNamespace(error_code=0, replica_election_results=[SimpleNamespace(
            topic="t", partition_result=[SimpleNamespace(partition_id=0, error_code=0,
                                                         error_message=None)])])

    async def describe_group(self, group):
        from weir.console.admin import AdminError

        raise AdminError(f"COORDINATOR_NOT_AVAILABLE: {group}")

    async def close(self):
        pass


async def scripted_read(_admin):
    return {"brokers": [{"id": 1, "host": "127.0.0.1", "port": 1}], "controller_id": 1,
            "topics": [], "groups": []}


def run_with_client(state: ConsoleState, scenario):
    async def main():
        async with TestClient(TestServer(make_app(state, interval_s=0.05))) as client:
            return await scenario(client)

    return asyncio.run(main())


async def _ready(client):
    for _ in range(200):  # the poller's first refresh
        doc = await (await client.get("/api/state")).json()
        if doc["ready"]:
            return doc
        await asyncio.sleep(0.02)
    raise AssertionError("the console never refreshed")


def test_read_only_console_refuses_actions():
    admin = ScriptedAdmin()
    state = ConsoleState(admin, lambda brokers: {}, read=scripted_read)

    async def scenario(client):
        for path, body in (("/api/elect", {}), ("/api/reassign", {"topic": "t", "partition": 0,
                                                                    "replicas": [1]}),
                           ("/api/topics", {"name": "x"}), ("/api/topics/x/delete", {}),
                           ("/api/topics/x/config", {"set": {"a": "b"}}),
                           ("/api/groups/g/reset-offsets", {})):
            response = await client.post(path, json=body)
            assert response.status == 403, path
            assert "--allow-actions" in (await response.json())["error"]
        doc = await _ready(client)
        assert doc["brokers"][0]["id"] == 1 and doc["allow_actions"] is False
        assert doc["controller"]["id"] == 1
        for path in ("/", "/topics", "/topics/a.b/messages", "/groups/g", "/brokers/1",
                     "/security", "/controller"):
            page = await client.get(path)
            assert page.status == 200 and "Weir console" in await page.text(), path
        for script in ("app.js", "ui.js", "pages.js", "pages2.js", "chart.js"):
            assert (await client.get(f"/static/{script}")).status == 200
        charts = await (await client.get("/api/charts")).json()
        assert "bytesin" in charts
        for path in ("/api/groups/team%2Fa", "/api/groups/team/a"):  # ids may hold "/"
            doc = await (await client.get(path)).json()
            assert doc == {"group": "team/a",
                           "error": "COORDINATOR_NOT_AVAILABLE: team/a"}, path
        assert (await client.get("/groups/team%2Fa")).status == 200
        missing = await client.get("/api/topics/nope")
        assert missing.status == 404
        assert (await missing.json())["error"].startswith("UNKNOWN_TOPIC_OR_PARTITION")

    run_with_client(state, scenario)
    assert admin.sent == []


def test_actions_when_allowed_and_bad_bodies():
    admin = ScriptedAdmin()
    state = ConsoleState(admin, lambda brokers: {}, allow_actions=True, read=scripted_read)

    async def scenario(client):
        response = await client.post("/api/elect",
                                     json={"partitions": [{"topic": "t", "partition": 0}]})
        assert response.status == 200
        assert (await response.json())["results"] == {"t-0": None}
        response = await client.post("/api/elect", json={"partitions": [{"topic": 1}]})
        assert response.status == 400
        response = await client.post("/api/elect", data=b"not json",
                                     headers={"Content-Type": "application/json"})
        assert response.status == 400
        for body in ({"topic": "t", "partition": 0, "replicas": []},
                     {"topic": "t", "partition": 0, "replicas": [1, 1]}):
            response = await client.post("/api/reassign", json=body)
            assert response.status == 400
        response = await client.post("/api/topics", json={"name": "x", "configs": {"a": 1}})
        assert response.status == 400
        response = await client.post("/api/topics/x/config", json={})
        assert "nothing to change" in (await response.json())["error"]
        # A misspelt field is refused, never read as absent: an ElectLeaders body without
        # "partitions" elects every partition of the cluster.
        for path, body in (("/api/elect", {"topic": "t", "partition": 0}),
                           ("/api/topics", {"name": "x", "replicationFactor": 3}),
                           ("/api/topics/x/config", {"set": {"a": "1"}, "remove": ["b"]}),
                           ("/api/reassign", {"topic": "t", "partition": 0, "replicas": [1],
                                              "dry_run": True}),
                           ("/api/groups/g/reset-offsets", {"topic": "t",
                                                            "scenario": "to-earliest",
                                                            "exec": True})):
            response = await client.post(path, json=body)
            assert response.status == 400, path
            assert (await response.json())["error"].startswith("unknown field(s) '"), path

    run_with_client(state, scenario)
    assert len(admin.sent) == 1
    assert [(t.topic, list(t.partitions)) for t in admin.sent[0].topic_partitions] == [
        ("t", [0])]


def test_actions_beyond_loopback_need_a_login(tmp_path):
    from weir.console.actions import COOKIE, Auth, is_loopback, read_password_file

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    secret = tmp_path / "console.passwords"
    secret.write_text("# operators\ns3cret\nops=other pass\n")
    assert read_password_file(secret) == {"admin": "s3cret", "ops": "other pass"}
    admin = ScriptedAdmin()
    auth = Auth(required=True, passwords=read_password_file(secret))
    state = ConsoleState(admin, lambda brokers: {}, allow_actions=True, read=scripted_read,
                         auth=auth)

    async def scenario(client):
        body = {"partitions": [{"topic": "t", "partition": 0}]}
        assert (await client.post("/api/elect", json=body)).status == 401
        session = await (await client.get("/api/session")).json()
        assert session == {"allow_actions": True, "login_required": True,
                           "method": "password file", "user": None}
        wrong = await client.post("/api/login", json={"username": "admin", "password": "x"})
        assert wrong.status == 401
        ok = await client.post("/api/login", json={"username": "admin", "password": "s3cret"})
        assert ok.status == 200 and COOKIE in ok.cookies
        assert (await client.post("/api/elect", json=body)).status == 200
        await client.post("/api/logout", json={})
        assert (await client.post("/api/elect", json=body)).status == 401

    run_with_client(state, scenario)
    assert len(admin.sent) == 1


def test_a_group_that_does_not_exist_is_group_id_not_found():
    """DescribeGroups answers an unknown group Dead with no error; the page says it does
    not exist (ConsumerGroupCommand), while an Empty group with offsets is shown."""
    class GroupsAdmin(ScriptedAdmin):
        async def describe_group(self, group):
            state = "Empty" if group == "kept" else "Dead"
            desc = SimpleNamespace(group_id=group, group_state=state,
                                   protocol_type="consumer" if group == "kept" else "",
                                   protocol_data="", members=[])
            return desc, ({("t", 0): 3} if group == "kept" else {})

    state = ConsoleState(GroupsAdmin(), lambda brokers: {}, read=scripted_read)

    async def scenario(client):
        await _ready(client)
        missing = await client.get("/api/groups/gone")
        assert missing.status == 404
        assert await missing.json() == {
            "group": "gone", "error": "GROUP_ID_NOT_FOUND: consumer group 'gone' does not exist"}
        kept = await client.get("/api/groups/kept")
        assert kept.status == 200
        doc = await kept.json()
        assert doc["state"] == "Empty" and doc["partitions"][0]["current_offset"] == 3

    run_with_client(state, scenario)


def test_an_unreachable_cluster_is_an_error_on_the_page_not_a_dead_server():
    from weir.console.admin import ConsoleAdmin
    from weir.ports import free_port

    admin = ConsoleAdmin(f"127.0.0.1:{free_port()}", timeout_s=1)
    state = ConsoleState(admin, lambda brokers: {})

    async def scenario(client):
        doc = await _ready(client)
        assert doc["error"].startswith("cluster unreachable through 127.0.0.1:")
        assert "no broker answered Metadata" in doc["error"]
        assert doc["brokers"] == []
        for path in ("/api/security", "/api/controller", "/api/groups/g"):
            response = await client.get(path)
            assert response.status == 200, path
            body = await response.json()
            assert any("no broker answered Metadata" in str(v) or "Connect" in str(v)
                       for v in body.values()), body

    run_with_client(state, scenario)


def test_unreachable_metrics_endpoint_is_skipped():
    state = ConsoleState(ScriptedAdmin(), lambda brokers: {1: "http://127.0.0.1:9"},
                         read=scripted_read)

    async def main():
        async with aiohttp.ClientSession() as http:
            await state.refresh(http)

    asyncio.run(main())
    assert state.view["brokers"][0]["metrics"] is None
    assert state.view["brokers"][0]["metrics_url"] == "http://127.0.0.1:9"
    assert len(state.history) == 1


def test_actions_beyond_loopback_without_any_login_refuse_to_start(capsys):
    from weir.cli.main import main

    assert main(["console", "--bootstrap-server", "127.0.0.1:1", "--host", "0.0.0.0",
                 "--allow-actions"]) == 1
    assert "--password-file" in capsys.readouterr().err
