"""``weir console``: the web console's HTTP server (aiohttp) and its poller.

One poller task refreshes a cached view every ``interval_s``: the AdminClient reads on a
worker thread, the brokers' metrics endpoints fetched concurrently (each with a short
timeout, so a frozen broker delays nothing else), ZooKeeper on a worker thread when given.
The page (``static/``) polls the JSON APIs; nothing a request does waits on the cluster,
except the actions.

Routes:

* ``GET /`` and ``/static/*``: the page;
* ``GET /api/state``: brokers, controller, topics/partitions, groups with lag, recent
  controller state changes;
* ``GET /api/charts``: rates from the brokers' counters (produce/fetch bytes, ISR
  shrinks/expands) and each broker's event-loop lag;
* ``POST /api/elect`` (``{"partitions": [{"topic", "partition"}]}`` or ``{}`` for all):
  preferred leader election (ElectLeaders);
* ``POST /api/reassign`` (``{"topic", "partition", "replicas": [...]}``): a partition
  reassignment (AlterPartitionReassignments, KIP-455).

Both actions answer 403 unless the console was started with ``--allow-actions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from weir.console import collect

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
HISTORY = 150
METRICS_TIMEOUT_S = 2.0


class ConsoleState:
    """The cached view the page reads, refreshed by :meth:`refresh`."""

    def __init__(self, reader: Any, endpoints: Callable[[list[dict[str, Any]]], dict[int, str]],
                 zk: Any = None, *, allow_actions: bool = False) -> None:
        self.reader = reader
        self.endpoints = endpoints
        self.zk = zk
        self.allow_actions = allow_actions
        self.view: dict[str, Any] = {"ready": False, "error": None}
        self.known: dict[int, dict[str, Any]] = {}  # every broker Metadata has listed
        self.history: deque[tuple[float, dict[int, dict[str, float]]]] = deque(maxlen=HISTORY)

    async def refresh(self, http: aiohttp.ClientSession) -> None:
        view: dict[str, Any] = {"ready": True, "error": None,
                                "allow_actions": self.allow_actions}
        try:
            view.update(await asyncio.to_thread(self.reader.read))
        except Exception as exc:  # noqa: BLE001 - shown on the page, retried next round
            view.update(self.view)
            view["error"] = f"cluster unreachable through {self.reader.bootstrap}: {exc}"
        endpoints = self.endpoints(view.get("brokers", []))
        fetched = await asyncio.gather(*(self._fetch(http, url) for url in endpoints.values()))
        metrics: dict[int, dict[str, float]] = {}
        controllers: list[dict[str, Any]] = []
        for broker_id, (text, ctrl) in zip(endpoints, fetched, strict=True):
            if text is not None:
                metrics[broker_id] = collect.broker_metrics(text)
            if ctrl is not None and ctrl.get("active"):
                controllers.append(ctrl)
        self.history.append((collect.now_s(), metrics))
        zk_view = None
        if self.zk is not None:
            try:
                zk_view = await asyncio.to_thread(collect.read_zookeeper, self.zk)
            except Exception as exc:  # noqa: BLE001 - keep the rest of the page alive
                zk_view = {"error": str(exc)}
        view["brokers"] = with_down_brokers(view.get("brokers", []), self.known)
        for b in view["brokers"]:
            b.update(metrics_url=endpoints.get(b["id"]), metrics=metrics.get(b["id"]))
        view["controller"] = _controller_view(view.get("controller_id"), zk_view, controllers)
        view["generated_s"] = collect.now_s()
        self.view = view

    async def _fetch(self, http: aiohttp.ClientSession, base: str
                     ) -> tuple[str | None, dict[str, Any] | None]:
        timeout = aiohttp.ClientTimeout(total=METRICS_TIMEOUT_S)
        text = ctrl = None
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
            async with http.get(base + "/metrics", timeout=timeout) as response:
                if response.status == 200:
                    text = await response.text()
            async with http.get(base + "/controller", timeout=timeout) as response:
                if response.status == 200:
                    ctrl = await response.json()
        return text, ctrl

    def charts(self) -> dict[str, Any]:
        return collect.rate_series(list(self.history))


def with_down_brokers(live: list[dict[str, Any]], known: dict[int, dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """Metadata lists live brokers only: one seen before and missing now is shown as down
    (``known`` is updated with the live ones)."""
    for b in live:
        known[b["id"]] = {k: b[k] for k in ("id", "host", "port")}
    live_ids = {b["id"] for b in live}
    rows = [{**b, "down": False} for b in live]
    rows += [{**b, "down": True} for i, b in known.items() if i not in live_ids]
    return sorted(rows, key=lambda b: b["id"])


STATE_KEY = web.AppKey("console", ConsoleState)


def _controller_view(metadata_id: int | None, zk_view: dict[str, Any] | None,
                     reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller as the page shows it: id and epoch from ZooKeeper when given (else
    Metadata's controller id and the controller's own report), event queue and state
    changes from the active controller's ``/controller`` endpoint."""
    report = max(reports, key=lambda r: r.get("epoch") or -1, default=None)
    out: dict[str, Any] = {"id": metadata_id, "epoch": None, "source": "metadata",
                           "event_queue_size": None, "current_event": None,
                           "events_processed": None, "state_changes": []}
    if report is not None:
        out.update({k: report.get(k) for k in ("epoch", "event_queue_size", "current_event",
                                               "events_processed")})
        out["state_changes"] = list(reversed(report.get("state_changes") or []))
        out["id"] = report.get("broker_id", metadata_id)
        out["source"] = "controller endpoint"
    if zk_view is not None:
        if zk_view.get("error"):
            out["zookeeper_error"] = zk_view["error"]
        else:
            out.update(id=zk_view["controller_id"], epoch=zk_view["epoch"],
                       registered=zk_view["registered"], source="zookeeper")
    return out


# -- handlers ------------------------------------------------------------------------------


def _state(request: web.Request) -> ConsoleState:
    return request.app[STATE_KEY]


async def index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def api_state(request: web.Request) -> web.Response:
    return web.json_response(_state(request).view)


async def api_charts(request: web.Request) -> web.Response:
    return web.json_response(_state(request).charts())


def _forbidden(state: ConsoleState) -> web.Response | None:
    if state.allow_actions:
        return None
    return web.json_response(
        {"error": "actions are disabled; start the console with --allow-actions"}, status=403)


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="expected a JSON body") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    return body


def parse_partitions(body: dict[str, Any]) -> list[tuple[str, int]] | None:
    """``{"partitions": [{"topic", "partition"}]}`` → pairs; absent → None (all)."""
    raw = body.get("partitions")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError("partitions must be a list")  # noqa: TRY004 - a 400 answer
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str) \
                or not isinstance(entry.get("partition"), int):
            raise ValueError(  # noqa: TRY004 - a 400 answer
                "each partition needs a topic (string) and partition (int)")
        out.append((entry["topic"], entry["partition"]))
    return out


async def api_elect(request: web.Request) -> web.Response:
    state = _state(request)
    refused = _forbidden(state)
    if refused is not None:
        return refused
    try:
        partitions = parse_partitions(await _json_body(request))
    except ValueError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    try:
        results = await asyncio.to_thread(state.reader.elect_preferred, partitions)
    except Exception as exc:  # noqa: BLE001 - reported to the page, not a server error
        return web.json_response({"error": f"ElectLeaders failed: {exc}"}, status=502)
    return web.json_response({"results": results})


async def api_reassign(request: web.Request) -> web.Response:
    state = _state(request)
    refused = _forbidden(state)
    if refused is not None:
        return refused
    body = await _json_body(request)
    topic, partition, replicas = body.get("topic"), body.get("partition"), body.get("replicas")
    if not isinstance(topic, str) or not isinstance(partition, int) \
            or not isinstance(replicas, list) or not replicas \
            or not all(isinstance(r, int) for r in replicas):
        return web.json_response(
            {"error": "expected {topic: str, partition: int, replicas: [int, ...]}"},
            status=400)
    from weir.cli.reassign import AdminSession, ReassignError
    from weir.common import TopicPartition
    from weir.protocol.errors import ErrorCode

    session = AdminSession(state.reader.bootstrap, timeout_s=10)
    try:
        results = await session.alter({TopicPartition(topic, partition): replicas})
    except (ReassignError, OSError, TimeoutError) as exc:
        return web.json_response({"error": str(exc)}, status=502)
    return web.json_response({"results": {
        f"{tp.topic}-{tp.partition}": None if code == ErrorCode.none else f"{code.name}: {msg or ''}"
        for tp, (code, msg) in results.items()}})


# -- the app -----------------------------------------------------------------------------------


def make_app(state: ConsoleState, interval_s: float = 2.0) -> web.Application:
    app = web.Application()
    app[STATE_KEY] = state
    app.router.add_get("/", index)
    app.router.add_get("/api/state", api_state)
    app.router.add_get("/api/charts", api_charts)
    app.router.add_post("/api/elect", api_elect)
    app.router.add_post("/api/reassign", api_reassign)
    app.router.add_static("/static/", STATIC)

    async def poller(app: web.Application):
        async with aiohttp.ClientSession() as http:
            async def loop() -> None:
                while True:
                    try:
                        await state.refresh(http)
                    except Exception:  # the console must keep polling
                        log.exception("console refresh failed")
                    await asyncio.sleep(interval_s)

            task = asyncio.create_task(loop(), name="console-poller")
            yield
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.cleanup_ctx.append(poller)
    return app


async def serve(state: ConsoleState, host: str, port: int, interval_s: float = 2.0,
                ready: Callable[[int], None] | None = None) -> None:
    """Serve until cancelled; ``ready(port)`` is called once bound."""
    runner = web.AppRunner(make_app(state, interval_s), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    if ready is not None:
        ready(bound)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
