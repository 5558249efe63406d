"""``weir console``: the web console's HTTP server (aiohttp) and its poller.

One poller task refreshes a cached view every ``interval_s`` through the console's own
protocol client (:mod:`weir.console.admin`; no native client library in the process, so no
client abort can take the console down), the brokers' metrics endpoints fetched
concurrently (each with a short timeout), ZooKeeper on a worker thread when given.  Every
failure is data on the page.  Detail pages (a broker's configs, a topic's configs, a group,
the message browser, ACLs and users, reassignments) are read when asked, each bounded by
the client's timeouts.

Pages (one HTML shell, drawn by ``static/app.js`` from the path): ``/`` (overview),
``/brokers``, ``/brokers/{id}``, ``/topics``, ``/topics/{name}``, ``/topics/{name}/messages``,
``/groups``, ``/groups/{id}``, ``/security``, ``/controller``.

JSON: ``GET /api/state``, ``/api/charts``, ``/api/brokers/{id}``, ``/api/topics/{name}``,
``/api/topics/{name}/messages``, ``/api/groups/{id}``, ``/api/security``,
``/api/controller``; the actions (``POST /api/...``, :mod:`weir.console.actions`) answer 403
unless the console was started with ``--allow-actions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from weir.console import collect, reader
from weir.console.state_key import STATE_KEY

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
HISTORY = 150
METRICS_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 20.0
PAGES = ("/", "/brokers", "/brokers/{id}", "/topics", "/topics/{name}",
         "/topics/{name}/messages", "/groups", "/groups/{group:.+}", "/security", "/controller")


class ConsoleState:
    """The cached view the pages read, refreshed by :meth:`refresh`.

    ``admin``: a :class:`weir.console.admin.ConsoleAdmin`; ``read``: the overview's reader
    (``reader.read_cluster``; tests pass a scripted one)."""

    def __init__(self, admin: Any, endpoints: Callable[[list[dict[str, Any]]], dict[int, str]],
                 zk: Any = None, *, allow_actions: bool = False,
                 read: Callable[[Any], Awaitable[dict[str, Any]]] | None = None,
                 auth: Any = None) -> None:
        self.admin = admin
        self.endpoints = endpoints
        self.zk = zk
        self.allow_actions = allow_actions
        self.auth = auth
        self._read = read or reader.read_cluster
        self.view: dict[str, Any] = {"ready": False, "error": None,
                                     "allow_actions": allow_actions}
        self.known: dict[int, dict[str, Any]] = {}  # every broker Metadata has listed
        self.history: deque[tuple[float, dict[int, dict[str, float]]]] = deque(maxlen=HISTORY)

    @property
    def bootstrap(self) -> str:
        return str(getattr(self.admin, "bootstrap", "?"))

    async def refresh(self, http: aiohttp.ClientSession) -> None:
        view: dict[str, Any] = {"ready": True, "error": None,
                                "allow_actions": self.allow_actions}
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                view.update(await self._read(self.admin))
        except Exception as exc:  # noqa: BLE001 - shown on the page, retried next round
            kept = {k: v for k, v in self.view.items() if k in ("topics", "groups")}
            view.update(kept, brokers=[], stale=True)
            reason = str(exc) or type(exc).__name__
            view["error"] = f"cluster unreachable through {self.bootstrap}: {reason}"
        live_ids = {b["id"] for b in view.get("brokers", [])}
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
                async with asyncio.timeout(READ_TIMEOUT_S):
                    zk_view = await asyncio.to_thread(collect.read_zookeeper, self.zk)
            except Exception as exc:  # noqa: BLE001 - keep the rest of the page alive
                zk_view = {"error": str(exc) or type(exc).__name__}
        view["brokers"] = with_down_brokers(view.get("brokers", []), self.known)
        log_dirs = view.pop("log_dirs", {})
        for b in view["brokers"]:
            # A broker down shows no figures: its last metrics would be stale.
            fresh = b["id"] in live_ids
            b.update(metrics_url=endpoints.get(b["id"]),
                     metrics=metrics.get(b["id"]) if fresh else None,
                     log_dirs=log_dirs.get(b["id"]) if fresh else None)
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

    def topic(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.view.get("topics", []) if t["name"] == name), None)

    def log_end_offsets(self) -> dict[tuple[str, int], int | str]:
        return {(p["topic"], p["partition"]): p.get("log_end_offset")
                for t in self.view.get("topics", []) for p in t["partitions"]
                if p.get("log_end_offset") is not None}


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
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def api_state(request: web.Request) -> web.Response:
    return web.json_response(_state(request).view)


async def api_charts(request: web.Request) -> web.Response:
    return web.json_response(_state(request).charts())


def _not_found(what: str) -> web.Response:
    return web.json_response({"error": what}, status=404)


async def api_broker(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        broker_id = int(request.match_info["id"])
    except ValueError:
        return _not_found(f"not a broker id: {request.match_info['id']!r}")
    row = next((b for b in state.view.get("brokers", []) if b["id"] == broker_id), None)
    if row is None:
        return _not_found(f"broker {broker_id} is not in the cluster")
    doc = {**row, "controller": state.view.get("controller", {}).get("id") == broker_id,
           "leader_partitions": sum(p["leader"] == broker_id
                                    for t in state.view.get("topics", [])
                                    for p in t["partitions"])}
    if not row["down"]:
        doc.update(await reader.broker_detail(state.admin, broker_id))
    return web.json_response(doc)


async def api_topic(request: web.Request) -> web.Response:
    state = _state(request)
    name = request.match_info["name"]
    topic = state.topic(name)
    if topic is None:
        return _not_found(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {name!r}")
    readers = [{"group": g["group"], "state": g.get("state"),
                "lag": sum(r["lag"] or 0 for r in g.get("partitions", [])
                           if r["topic"] == name)}
               for g in state.view.get("groups", []) if name in g.get("topics", [])]
    return web.json_response({**topic, "groups": readers,
                              **await reader.topic_configs(state.admin, name)})


def _int_arg(request: web.Request, key: str, default: int | None) -> int | None:
    raw = request.query.get(key, "")
    if raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{key} must be an integer, got {raw!r}") from None


async def api_messages(request: web.Request) -> web.Response:
    """``?partition=N|all&from=newest|offset|timestamp&offset=&timestamp=&limit=``."""
    state = _state(request)
    name = request.match_info["name"]
    topic = state.topic(name)
    if topic is None:
        return _not_found(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {name!r}")
    start = request.query.get("from", "newest")
    if start not in ("newest", "offset", "timestamp"):
        return web.json_response({"error": "from must be newest, offset or timestamp"},
                                 status=400)
    try:
        raw_partition = request.query.get("partition", "all")
        partition = None if raw_partition in ("", "all") else _int_arg(request, "partition",
                                                                       None)
        value = _int_arg(request, start, None) if start != "newest" else None
        limit = _int_arg(request, "limit", 50) or 50
    except web.HTTPBadRequest as exc:
        return web.json_response({"error": exc.text}, status=400)
    if start != "newest" and value is None:
        return web.json_response({"error": f"from={start} needs {start}=..."}, status=400)
    began = time.monotonic()
    doc = await reader.browse(state.admin, topic, partition, start, value, limit)
    doc["took_ms"] = round((time.monotonic() - began) * 1000)
    return web.json_response(doc)


async def api_group(request: web.Request) -> web.Response:
    state = _state(request)
    doc = await reader.group_detail(state.admin, request.match_info["group"],
                                    state.log_end_offsets())
    return web.json_response(doc, status=404 if doc.pop("missing", False) else 200)


async def api_security(request: web.Request) -> web.Response:
    return web.json_response(await reader.security(_state(request).admin))


async def api_controller(request: web.Request) -> web.Response:
    state = _state(request)
    doc = {**state.view.get("controller", {}), **await reader.reassignments(state.admin)}
    sizes = {}
    for b in state.view.get("brokers", []):
        for topic, partition, size, future in (b.get("log_dirs") or {}).get("sizes", []):
            if not future:
                sizes[(topic, partition, b["id"])] = size
    leaders = {(p["topic"], p["partition"]): p["leader"]
               for t in state.view.get("topics", []) for p in t["partitions"]}
    for move in doc.get("reassignments", []):
        tp = (move["topic"], move["partition"])
        target = sizes.get((*tp, leaders.get(tp, -1)))
        move["progress"] = [{"broker": b, "bytes": sizes.get((*tp, b)), "leader_bytes": target}
                            for b in move["adding"]]
    return web.json_response(doc)


# -- the app -----------------------------------------------------------------------------------


def make_app(state: ConsoleState, interval_s: float = 2.0) -> web.Application:
    from weir.console import actions, group_reset

    app = web.Application()
    app[STATE_KEY] = state
    for path in PAGES:
        app.router.add_get(path, index)
    app.router.add_get("/api/state", api_state)
    app.router.add_get("/api/charts", api_charts)
    app.router.add_get("/api/brokers/{id}", api_broker)
    app.router.add_get("/api/topics/{name}", api_topic)
    app.router.add_get("/api/topics/{name}/messages", api_messages)
    app.router.add_get("/api/groups/{group:.+}", api_group)  # a group id may hold "/"
    app.router.add_get("/api/security", api_security)
    app.router.add_get("/api/controller", api_controller)
    actions.add_routes(app)
    group_reset.add_routes(app)
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
            with contextlib.suppress(Exception):
                await state.admin.close()

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
