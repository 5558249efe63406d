"""The web console in a real headless browser (Debian's Chromium driven by Playwright) against
a real 3-broker cluster: every page is walked and checked for what it shows (a produced
record's value and header in the message browser, a topic config's value and source, a
group's members and lag, broker configs and log dirs, the controller's epoch and state
changes, the security page's answer), each action is run from its form (topic create,
config change, preferred election, reassignment, offset reset dry run then execute, topic
delete), and a broker is SIGKILLed and restarted while the console is open: the console
keeps serving at the same URL, shows the broker down, then up again.

One cluster and one console process for the module; screenshots in
test-artifacts/console/."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from weir.ops import procs
from weir.ops.cluster import LocalCluster
from weir.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
# As root on a closed network: no sandbox, and nothing that phones home (it would hang);
# a fresh profile directory per module (launch_persistent_context's user_data_dir).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
GROUP = "console-test-group"
TOPIC = "orders"
WAIT_MS = 30_000

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is absent (`make deps` installs Debian's chromium package)",
                allow_module_level=True)


def api(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url.rstrip("/") + path, data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("console") / "data", brokers=3, port_base=0,
                     overrides={"replica.lag.time.max.ms": "3000"})
    c.serve_metrics = True  # as `weir up --console`
    try:
        c.start(timeout_s=90)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def console(cluster):
    """``weir console --allow-actions`` on loopback (no login there), stopped by PID."""
    port = free_port()
    log_path = cluster.data_dir / "console-actions.log"
    with open(log_path, "ab") as log_file:
        child = subprocess.Popen(
            [sys.executable, "-m", "weir", "console", "--data-dir", str(cluster.data_dir),
             "--port", str(port), "--interval", "1", "--allow-actions"],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: api(url, "/api/state")[1].get("ready"), 30, interval_s=0.2,
                 what="the console's first read")
        yield url, child
    finally:
        procs.terminate([child.pid], 10, {child.pid: child})
        print(log_path.read_text(errors="replace")[-3000:])


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:  # Debian's chromium: never `playwright install`
        context = pw.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"), executable_path=CHROMIUM,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1200})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def page(browser):
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}")
            if m.type == "error" and "the server responded with a status" not in m.text
            else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.problems = problems
    yield page
    page.close()


@pytest.fixture(scope="module")
def data(cluster):
    """A topic with JSON records (one with a key and a header) and a group with an active
    member whose committed offset leaves a lag of 7 on partition 0."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(cluster.bootstrap, TOPIC, partitions=3, replication=3,
                 config={"retention.ms": "123456789"})
    produce(cluster.bootstrap, TOPIC, [json.dumps({"order": i}).encode() for i in range(9)],
            partition=0, acks="all")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce(TOPIC, key=b"k-42", value=b'{"order": 42, "item": "anvil"}', partition=0,
                     headers=[("source", b"console-test")])
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                         "client.id": "console-test-client", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    wait_for(lambda: consumer.poll(0.2) is not None or consumer.assignment(), 60,
             interval_s=0, what="the consumer's assignment")

    def committed() -> bool:
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
        except Exception:  # noqa: BLE001 - the coordinator may still be loading
            return False
        return True

    wait_for(committed, 60, interval_s=0.5, what="the group's offset commit")
    yield consumer
    consumer.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def text(page, selector: str) -> str:
    return (page.text_content(selector, timeout=WAIT_MS) or "").strip()


def test_pages(console, page, data, cluster):
    url, _child = console
    page.goto(url + "/")
    page.wait_for_function("document.querySelectorAll('#brokers tbody tr').length === 3",
                           timeout=WAIT_MS)
    assert text(page, "#brokers-count .value") == "3 / 3"
    assert text(page, "#controller-id .value") == str(cluster.controller_id())
    assert text(page, "#mode") == "actions enabled"
    # Internal topics are hidden unless asked: __consumer_offsets is not counted.
    topics = [t["name"] for t in api(url, "/api/state")[1]["topics"] if not t["internal"]]
    assert text(page, "#topics-count .value") == str(len(topics))
    page.wait_for_selector(f'#groups-overview tr[data-group="{GROUP}"] td.lag',
                           timeout=WAIT_MS)
    page.wait_for_function("document.querySelectorAll('#chart-produce path').length > 0",
                           timeout=WAIT_MS)
    shot(page, "overview")

    # Brokers: a broker's page has its configs with sources and its log dirs.
    page.click("#nav a[data-page=brokers]")
    page.wait_for_selector('#brokers tr[data-broker="1"]', timeout=WAIT_MS)
    page.click('#brokers tr[data-broker="1"] a')
    page.wait_for_selector('#broker-configs tr[data-config="log.retention.hours"]',
                           timeout=WAIT_MS)
    assert text(page, '#broker-configs tr[data-config="log.retention.hours"] td.value') == "168"
    page.wait_for_selector("#log-dirs-table tbody tr", timeout=WAIT_MS)
    assert "broker-1" in text(page, "#log-dirs-table tbody tr td")
    page.fill("#config-filter", "retention.hours")
    shot(page, "broker")

    # Topics: search, then the topic page with partitions, configs and the reading group.
    page.click("#nav a[data-page=topics]")
    page.fill("#topic-search", "orde")
    page.wait_for_function("document.querySelectorAll('#topics tbody tr').length === 1",
                           timeout=WAIT_MS)
    page.wait_for_function(
        f"(document.querySelector('#topics tr[data-topic=\"{TOPIC}\"] td.records') || {{}})"
        ".textContent === '10'", timeout=WAIT_MS)
    shot(page, "topics")
    page.click(f'#topics tr[data-topic="{TOPIC}"] a')
    page.wait_for_selector('#topic-configs tr[data-config="retention.ms"]', timeout=WAIT_MS)
    row = '#topic-configs tr[data-config="retention.ms"]'
    assert text(page, f"{row} td.value") == "123456789"
    assert text(page, f"{row} td:nth-child(3)") == "DYNAMIC_TOPIC_CONFIG"
    page.wait_for_selector(f'#topic-groups-table tr[data-group="{GROUP}"]', timeout=WAIT_MS)
    assert text(page, f'#topic-groups-table tr[data-group="{GROUP}"] td.lag') == "7"
    assert text(page, '#topic-partitions tr[data-partition="0"] td.leo') == "10"
    shot(page, "topic")

    # The message browser: newest first; the record with a key and a header; JSON view;
    # a search in the loaded records.
    page.click("text=browse messages")
    page.wait_for_selector('#messages tr[data-partition="0"][data-offset="9"]',
                           timeout=WAIT_MS)
    newest = '#messages tr[data-offset="9"]'
    assert text(page, f"{newest} td.key") == "k-42"
    assert text(page, f"{newest} td.value") == '{"order": 42, "item": "anvil"}'
    assert text(page, f"{newest} td.headers") == "source: console-test"
    page.select_option("#msg-format", "json")
    assert '"item": "anvil"' in text(page, f"{newest} td.value pre")
    page.fill("#msg-search", "anvil")
    page.wait_for_function("document.querySelectorAll('#messages tbody tr').length === 1",
                           timeout=WAIT_MS)
    shot(page, "messages")
    page.fill("#msg-search", "")
    page.select_option("#msg-partition", "0")
    page.select_option("#msg-from", "offset")
    page.fill("#msg-offset", "7")
    page.click("#browse button[type=submit]")
    page.wait_for_function("document.querySelectorAll('#messages tbody tr').length === 3",
                           timeout=WAIT_MS)
    page.select_option("#msg-from", "timestamp")
    page.fill("#msg-time", time.strftime("%Y-%m-%dT%H:%M:%S",
                                         time.localtime(time.time() - 3600)))
    page.click("#browse button[type=submit]")
    page.wait_for_function("document.querySelectorAll('#messages tbody tr').length === 10",
                           timeout=WAIT_MS)

    # Groups: the list, then the group page with its member and lag per partition.
    page.click("#nav a[data-page=groups]")
    page.wait_for_selector(f'#groups tr[data-group="{GROUP}"]', timeout=WAIT_MS)
    assert text(page, f'#groups tr[data-group="{GROUP}"] td.state') == "Stable"
    page.click(f'#groups tr[data-group="{GROUP}"] a')
    page.wait_for_selector("#members tbody tr", timeout=WAIT_MS)
    assert "console-test-client" in text(page, "#members tbody")
    lag = f'#group-lag tr[data-topic="{TOPIC}"][data-partition="0"] td.lag'
    assert text(page, lag) == "7"
    shot(page, "group")

    # Controller and security.
    page.click("#nav a[data-page=controller]")
    page.wait_for_selector("#no-reassignments, #reassignments", timeout=WAIT_MS)
    assert text(page, '#controller dd[data-fact="epoch"]').isdigit()
    page.wait_for_selector("#changes tbody tr", timeout=WAIT_MS)
    shot(page, "controller")
    page.click("#nav a[data-page=security]")
    # A cluster without an authorizer answers DescribeAcls with Kafka's error, shown as such.
    page.wait_for_selector("#acls-error", timeout=WAIT_MS)
    assert text(page, "#acls-error").startswith("SECURITY_DISABLED")
    shot(page, "security")
    assert not page.problems, page.problems


def test_pages_of_what_does_not_exist(console, page):
    """A broker id or group the cluster lacks is said so on its page, with nothing left
    "loading…"; an unknown group is GROUP_ID_NOT_FOUND (DescribeGroups answers it Dead)."""
    url, _child = console
    for path, said in (("/brokers/99", "broker 99 is not in the cluster"),
                       ("/brokers/abc", "not a broker id: 'abc'")):
        page.goto(url + path)
        assert text(page, "#broker-facts.error-text") == said
        page.wait_for_function("!document.body.textContent.includes('loading')",
                               timeout=WAIT_MS)
    page.goto(url + "/groups/no-such-group")
    # On a fresh cluster the first FindCoordinator creates __consumer_offsets and answers
    # COORDINATOR_NOT_AVAILABLE meanwhile; the page asks again on its next refresh.
    said = "GROUP_ID_NOT_FOUND: consumer group 'no-such-group' does not exist"
    page.wait_for_function(
        f"(document.querySelector('#group-facts.error-text') || {{}}).textContent === {said!r}",
        timeout=WAIT_MS)
    assert page.eval_on_selector("#members-box", "e => e.textContent") == ""
    assert api(url, "/api/groups/no-such-group")[0] == 404
    assert not page.problems, page.problems


def test_actions(console, page, data, cluster):
    url, _child = console
    # Create a topic from the form.
    page.goto(url + "/topics")
    page.wait_for_selector("#create-topic", timeout=WAIT_MS)
    page.fill("#new-topic-name", "made-in-console")
    page.fill("#new-topic-partitions", "2")
    page.fill("#new-topic-rf", "2")
    page.fill("#new-topic-configs", "cleanup.policy=compact")
    page.click("#create-topic button[type=submit]")
    page.wait_for_selector('#create-topic-result li[data-resource="made-in-console"]',
                           timeout=WAIT_MS)
    assert text(page, '#create-topic-result li') == "made-in-console: done"
    page.click("#create-topic button[type=submit]")  # again: Kafka's error, readable
    page.wait_for_function(
        "(document.querySelector('#create-topic-result li') || {}).textContent"
        "?.startsWith('made-in-console: TOPIC_ALREADY_EXISTS')", timeout=WAIT_MS)

    # Change a config on the topic page; the configs table shows it after the refresh.
    page.goto(url + "/topics/made-in-console")
    page.wait_for_selector("#alter-config", timeout=WAIT_MS)
    page.fill("#config-key", "retention.ms")
    page.fill("#config-value", "3600000")
    page.click("#alter-config button[type=submit]")
    page.wait_for_selector('#alter-config-result li:has-text("made-in-console: done")',
                           timeout=WAIT_MS)
    page.fill("#config-key", "no.such.config")
    page.fill("#config-value", "1")
    page.click("#alter-config button[type=submit]")
    page.wait_for_selector('#alter-config-result li:has-text("INVALID")', timeout=WAIT_MS)
    page.wait_for_function(
        "(document.querySelector('#topic-configs tr[data-config=\"retention.ms\"] td.value')"
        " || {}).textContent === '3600000'", timeout=WAIT_MS)

    # Preferred election and a reassignment (a form, not a prompt) of partition 0.
    page.wait_for_selector('#topic-partitions tr[data-partition="0"] button.elect',
                           timeout=WAIT_MS)
    page.click('#topic-partitions tr[data-partition="0"] button.elect')
    page.wait_for_selector('#topic-partitions tr[data-partition="0"] .result li',
                           timeout=WAIT_MS)
    assert "made-in-console-0" in text(page, '#topic-partitions tr[data-partition="0"] .result')
    replicas = api(url, "/api/topics/made-in-console")[1]["partitions"][0]["replicas"]
    target = [b for b in cluster.broker_ids if b not in replicas][:1] + replicas[:1]
    cell = '#topic-partitions tr[data-partition="0"] input.replicas'
    page.fill(cell, ",".join(map(str, target)))
    page.click('#topic-partitions tr[data-partition="0"] form.reassign button')
    page.wait_for_selector('#topic-partitions tr[data-partition="0"] .result li:has-text('
                           '"made-in-console-0: done")', timeout=WAIT_MS)
    shot(page, "actions-topic")
    wait_for(lambda: sorted(api(url, "/api/topics/made-in-console")[1]["partitions"][0]
                            ["replicas"]) == sorted(target), 60, interval_s=0.5,
             what="the reassignment to complete")

    # Offset reset: refused while the group has a member; a dry run, then executed.
    page.goto(url + f"/groups/{GROUP}")
    page.wait_for_selector("#reset-offsets", timeout=WAIT_MS)
    page.select_option("#reset-topic", TOPIC)
    page.select_option("#reset-scenario", "to-offset")
    page.fill("#reset-value", "8")
    page.click("#reset-dry-run")
    page.wait_for_selector('#reset-plan tr[data-partition="0"] td.new-offset', timeout=WAIT_MS)
    assert text(page, '#reset-plan tr[data-partition="0"] td.new-offset') == "8"
    page.click("#reset-execute")
    page.wait_for_selector('#reset-result .error-text:has-text("inactive")', timeout=WAIT_MS)
    data.close()  # the member leaves: the group is Empty
    wait_for(lambda: api(url, f"/api/groups/{GROUP}")[1].get("state") == "Empty", 30,
             interval_s=0.5, what="the group to be Empty")
    page.click("#reset-dry-run")
    page.wait_for_selector("#reset-execute:not([disabled])", timeout=WAIT_MS)
    page.click("#reset-execute")
    page.wait_for_selector(f'#reset-result li:has-text("{TOPIC}-0: done")', timeout=WAIT_MS)
    page.wait_for_function(
        f"(document.querySelector('#group-lag tr[data-topic=\"{TOPIC}\"][data-partition=\"0\"]"
        " td.lag') || {}).textContent === '2'", timeout=WAIT_MS)
    shot(page, "actions-group")

    # Delete the topic created above (the name typed as confirmation).
    page.goto(url + "/topics/made-in-console")
    page.wait_for_selector("#delete-topic", timeout=WAIT_MS)
    page.fill("#delete-confirm", "made-in-console")
    page.click("#delete-topic button[type=submit]")
    page.wait_for_selector('#delete-topic-result li:has-text("made-in-console: done")',
                           timeout=WAIT_MS)
    wait_for(lambda: all(t["name"] != "made-in-console"
                         for t in api(url, "/api/state")[1]["topics"]), 60, interval_s=0.5,
             what="the topic to be gone")
    assert not page.problems, page.problems


def test_keeps_refreshing_while_a_broker_is_frozen(console, data, cluster):
    """SIGSTOP: the broker keeps its sockets and answers nothing; every read of it costs
    one timeout (5 s), and the overview still refreshes without a cluster-wide error."""
    url, _child = console
    victim = next(b for b in cluster.broker_ids if b != cluster.controller_id())
    cluster.pause_broker(victim)
    try:
        paused_at = time.time()
        fresh = wait_for(lambda: (doc := api(url, "/api/state")[1])["generated_s"]
                         > paused_at + 6 and doc, 40, interval_s=0.5,
                         what="a refresh completed after the broker froze")
        assert fresh["error"] is None, fresh["error"]
        row = next(b for b in fresh["brokers"] if b["id"] == victim)
        assert row["metrics"] is None  # its metrics endpoint is frozen too
        if row["down"]:  # its ZooKeeper session expired meanwhile: out of the Metadata
            assert row["log_dirs"] is None, row  # and no stale figures
        else:  # the read failed as data on the page: a timeout, or a connection it lost
            error = row["log_dirs"]["error"]
            assert error.endswith(("did not answer within 5 s", "connection closed")), row
        began = time.monotonic()
        assert api(url, f"/api/topics/{TOPIC}")[0] == 200
        assert time.monotonic() - began < 15
    finally:
        cluster.resume_broker(victim)


def test_survives_a_broker_killed_and_restarted(console, page, data, cluster):
    url, child = console
    page.goto(url + "/")
    page.wait_for_function("document.querySelectorAll('#brokers tbody tr').length === 3",
                           timeout=WAIT_MS)
    controller = cluster.controller_id()
    victim = next(b for b in cluster.broker_ids if b != controller)
    cluster.kill_broker(victim, signal.SIGKILL)
    page.wait_for_selector(f'#brokers tr.down[data-broker="{victim}"]', timeout=60_000)
    assert text(page, "#brokers-count .value") == "2 / 3"
    # A dead broker shows no stale figures.
    cells = page.eval_on_selector_all(f'#brokers tr[data-broker="{victim}"] td',
                                      "tds => tds.map(td => td.textContent)")
    assert cells[3:9] == ["–"] * 6, cells
    page.wait_for_selector(f'#partitions tr[data-topic="{TOPIC}"]', timeout=60_000)
    shot(page, "broker-down")
    # Its own page says why there are no log dirs or configs (they are read from it).
    page.goto(url + f"/brokers/{victim}")
    assert text(page, "#log-dirs-down") == (f"broker {victim} is down: its log dirs and "
                                            "configs cannot be read until it is back")
    page.goto(url + "/")
    page.wait_for_selector(f'#brokers tr.down[data-broker="{victim}"]', timeout=WAIT_MS)
    # Every page still answers while the broker is down.
    for path in (f"/api/topics/{TOPIC}", f"/api/groups/{GROUP}", "/api/security",
                 "/api/controller", f"/api/brokers/{controller}"):
        assert api(url, path)[0] == 200, path
    status, doc = api(url, f"/api/topics/{TOPIC}/messages?partition=all&from=newest&limit=20")
    assert status == 200 and len(doc["records"]) == 10, doc

    cluster.start_broker(victim)
    page.wait_for_selector(f'#brokers tr[data-broker="{victim}"]:not(.down)', timeout=60_000)
    # Past the moment the old client library aborted (about 12 s after the restart), with
    # the ISR whole again: the same console process serves the same URL.
    page.wait_for_function(
        "document.querySelectorAll('#partitions tbody tr[data-topic]').length === 0",
        timeout=90_000)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        assert child.poll() is None, "the console process exited"
        assert api(url, "/api/state")[1]["ready"]
        time.sleep(1)
    assert child.poll() is None
    assert text(page, "#brokers-count .value") == "3 / 3"
    shot(page, "broker-back")
    assert not page.problems, page.problems
