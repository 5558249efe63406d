"""The console on a ``weir up --secure`` cluster (SASL_SSL, SCRAM, ACLs): it reads the
cluster with the data dir's ``client.properties`` (TLS and SCRAM through its own client),
the security page lists the SCRAM users and ACLs, and a console listening beyond loopback
logs operators in against the cluster's SCRAM users before any action."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.conftest import wait_for
from weir.config import read_properties
from weir.ops import procs
from weir.ops.cluster import LocalCluster
from weir.ops.secure import SecureCluster
from weir.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"  # as tests/integration/test_console.py launches it
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=20) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("console-secure") / "data", brokers=1,
                     port_base=0)
    c.secure = SecureCluster(c.data_dir)
    try:
        c.start(timeout_s=90)
        yield c
    finally:
        c.stop()


def test_console_reads_a_secure_cluster(secure):
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "weir", "console", "--data-dir", str(secure.data_dir),
         "--port", str(port), "--interval", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        state = wait_for(lambda: (doc := get(url + "/api/state"))["ready"]
                         and not doc["error"] and doc, 60, interval_s=0.3,
                         what="the console's read of the secure cluster")
        assert [b["id"] for b in state["brokers"]] == secure.broker_ids
        doc = get(url + "/api/security")
        assert "acls_error" not in doc and "users_error" not in doc, doc
        assert {u["user"] for u in doc["users"]} >= {"admin", "broker"}
        assert all(m["mechanism"].startswith("SCRAM-SHA-") for u in doc["users"]
                   for m in u["mechanisms"])
        broker = get(url + f"/api/brokers/{secure.broker_ids[0]}")
        assert any(c["name"] == "sasl.enabled.mechanisms" for c in broker["configs"])
        shoot_security_page(url)
    finally:
        procs.terminate([child.pid], 10, {child.pid: child})


def shoot_security_page(url: str) -> None:
    """The security page in Chromium, kept as a screenshot (the users must show)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        return
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.goto(url + "/security")
            page.wait_for_selector('#users tr[data-user="admin"]', timeout=30_000)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "security-secure.png"), full_page=True)
        finally:
            browser.close()


def test_login_beyond_loopback_against_the_clusters_scram_users(secure):
    from weir.console.actions import COOKIE, Auth
    from weir.console.admin import ConsoleAdmin, security_from_properties
    from weir.console.server import ConsoleState, make_app

    props = read_properties(secure.data_dir / "client.properties")
    password = props["sasl.password"]

    async def main() -> None:
        admin = ConsoleAdmin(secure.bootstrap, security_from_properties(props))
        auth = Auth(required=True, admin=admin)
        state = ConsoleState(admin, lambda brokers: {}, allow_actions=True, auth=auth)
        async with TestClient(TestServer(make_app(state, interval_s=0.5))) as client:
            body = {"partitions": [{"topic": "none-such", "partition": 0}]}
            assert (await client.post("/api/elect", json=body)).status == 401
            session = await (await client.get("/api/session")).json()
            assert session["method"] == "cluster SCRAM users"
            wrong = await client.post("/api/login",
                                      json={"username": "admin", "password": "wrong"})
            assert wrong.status == 401
            ok = await client.post("/api/login",
                                   json={"username": "admin", "password": password})
            assert ok.status == 200 and COOKIE in ok.cookies
            elected = await client.post("/api/elect", json=body)
            assert elected.status == 200
            results = (await elected.json())["results"]
            assert results["none-such-0"].startswith("UNKNOWN_TOPIC_OR_PARTITION")

    asyncio.run(main())


def test_login_form_in_the_browser(secure):
    """The header's login form: a wrong password is refused on the page, the right one
    signs the operator in (actions then pass), logging out closes them again."""
    import threading

    from playwright.sync_api import sync_playwright

    from weir.console.actions import Auth
    from weir.console.admin import ConsoleAdmin, security_from_properties
    from weir.console.server import ConsoleState, serve

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent")
    props = read_properties(secure.data_dir / "client.properties")
    admin = ConsoleAdmin(secure.bootstrap, security_from_properties(props))
    # Auth(required=True) is what a console bound beyond loopback gets; the test binds
    # loopback and runs the server on a thread beside Playwright's synchronous API.
    state = ConsoleState(admin, lambda brokers: {}, allow_actions=True,
                         auth=Auth(required=True, admin=admin))
    port, loop, bound = free_port(), asyncio.new_event_loop(), threading.Event()
    task = loop.create_task(serve(state, "127.0.0.1", port, 0.5, lambda _p: bound.set()))
    thread = threading.Thread(target=lambda: loop.run_until_complete(
        asyncio.gather(task, return_exceptions=True)), daemon=True)
    thread.start()
    try:
        assert bound.wait(30)
        url = f"http://127.0.0.1:{port}"
        elect = """async () => (await fetch('/api/elect', {method: 'POST',
                      headers: {'Content-Type': 'application/json'},
                      body: JSON.stringify({partitions: []})})).status"""
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 500})
                page.goto(url + "/")
                page.wait_for_selector("#login-form", timeout=30_000)
                assert page.evaluate(elect) == 401
                page.fill("#login-user", "admin")
                page.fill("#login-password", "wrong")
                page.click("#login-form button")
                page.wait_for_selector('.login-error:has-text("wrong username or password")',
                                       timeout=30_000)
                page.fill("#login-password", props["sasl.password"])
                page.click("#login-form button")
                page.wait_for_selector('#login:has-text("signed in as admin")',
                                       timeout=30_000)
                assert page.evaluate(elect) == 200
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "signed-in.png"))
                page.click('#login button:has-text("log out")')
                page.wait_for_selector("#login-form", timeout=30_000)
                assert page.evaluate(elect) == 401
            finally:
                browser.close()
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(30)
        loop.close()
