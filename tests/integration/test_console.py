"""The web console in a real headless browser (Debian's Chromium driven by Playwright) against
a real 3-broker cluster started the way ``weir up --console`` starts it: the page loads
without console errors and shows brokers, the controller, topics and a group's lag; when a
follower is killed its partition turns up under-replicated on the page; actions answer 403
in the default read-only mode.  Screenshots are kept in test-artifacts/console/."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.clients import produce
from tests.integration.replication_checks import partition_leaders
from weir.cli.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
# As root on a closed network: no sandbox, and nothing that phones home (it would hang);
# a fresh profile directory per test (launch_persistent_context's user_data_dir).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
GROUP = "console-test-group"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is absent (`make deps` installs Debian's chromium package)",
                allow_module_level=True)


def api(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url.rstrip("/") + path, data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def commit_offset(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Commit ``offset`` for GROUP as a consumer does (its coordinator lookup retries while
    the fresh cluster creates __consumer_offsets)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False})
    try:
        def committed() -> bool:
            try:
                consumer.commit(offsets=[TopicPartition(topic, partition, offset)],
                                asynchronous=False)
            except KafkaException:
                return False
            return True

        wait_for(committed, 60, interval_s=0.5, what="the group's offset commit")
    finally:
        consumer.close()


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "data", brokers=3, port_base=0,
                     overrides={"replica.lag.time.max.ms": "3000"})
    c.serve_metrics = True  # as `weir up --console`
    try:
        c.start(timeout_s=90)
        c.start_console()
        yield c
    finally:
        c.stop()


@pytest.fixture
def browser(tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:  # Debian's chromium: never `playwright install`
        context = pw.chromium.launch_persistent_context(
            tmp_path / "chromium-profile", executable_path=CHROMIUM, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1600})
        try:
            yield context
        finally:
            context.close()


def test_console_shows_the_cluster_and_an_under_replicated_partition(cluster, browser,
                                                                     topic_name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = cluster.console_url
    state = json.loads(cluster.cluster_file.read_text())
    assert state["console"] == url and state["console_pid"] > 0

    controller = cluster.controller_id()
    follower, other = [b for b in cluster.broker_ids if b != controller]
    cluster.zk().create_topic(topic_name, {0: [controller, follower, other],
                                           1: [controller, other, follower]}, {})
    wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name).get(0) == controller, 30,
             what="the controller leading partition 0")
    produce(cluster.bootstrap, topic_name, [b"v%d" % i for i in range(10)], partition=0,
            acks="all")
    commit_offset(cluster.bootstrap, topic_name, 0, 3)  # the group's lag is then 7

    # Read-only by default: the actions are refused.
    assert api(url, "/api/elect", {})[0] == 403
    assert api(url, "/api/reassign", {"topic": topic_name, "partition": 0,
                                      "replicas": [1, 2, 3]})[0] == 403

    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.goto(url)

    page.wait_for_function("document.querySelectorAll('#brokers tbody tr').length === 3",
                           timeout=30_000)
    row = f'#partitions tr[data-topic="{topic_name}"]'
    page.wait_for_selector(f'{row}[data-partition="0"][data-status="ok"]', timeout=30_000)
    lag_cell = f'tr[data-group="{GROUP}"][data-topic="{topic_name}"] td.lag'
    page.wait_for_function(
        f"(document.querySelector('{lag_cell}') || {{}}).textContent === '7'", timeout=30_000)
    assert page.text_content("#controller-id .value") == str(controller)
    assert page.text_content('#controller dd[data-fact="epoch"]').isdigit()
    assert page.text_content("#mode") == "read-only"
    # Every broker's metrics answered, the event-loop lag histogram among them.
    doc = api(url, "/api/state")[1]
    assert all(b["metrics"] and b["metrics"]["looplagcount"] > 0 for b in doc["brokers"])
    assert doc["controller"]["state_changes"], "the controller's state-change ring"
    page.wait_for_function("document.querySelectorAll('#chart-produce path').length > 0",
                           timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "healthy.png"), full_page=True)

    cluster.kill_broker(follower, signal.SIGKILL)
    page.wait_for_selector(f'{row}[data-partition="0"][data-status="under-replicated"]',
                           timeout=60_000)
    page.wait_for_selector(f'{row}[data-partition="1"][data-status="under-replicated"]',
                           timeout=30_000)
    page.wait_for_selector(f'#brokers tr.down[data-broker="{follower}"]', timeout=30_000)
    assert page.text_content("#brokers-count .value") == "2 / 3"
    urp = int(page.text_content("#urp-count .value"))
    assert urp >= 2
    isr_cell = f'{row}[data-partition="0"] td:nth-child(5)'
    assert page.text_content(isr_cell) == f"{controller}, {other}"
    page.screenshot(path=str(ARTIFACTS / "under-replicated.png"), full_page=True)
    page.close()
    assert not problems, problems

