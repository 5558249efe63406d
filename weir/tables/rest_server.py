"""``weir table catalog-server``: the Iceberg REST Catalog API over HTTP (aiohttp, the
console's server library).  The requests are answered by
:class:`weir.tables.rest_catalog.RestCatalogHandler`, on one thread off the event loop (the
catalog's SQL and metadata files are blocking work; one thread also keeps SQLite's
connections on the thread that made them).  Commits are serialised by that thread, and are
compare-and-swaps in the catalog in any case.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from aiohttp import web

from weir.tables.settings import CatalogSettings

if TYPE_CHECKING:
    from weir.tables.rest_catalog import RestCatalogHandler

__all__ = ["make_app", "serve"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
"""A commit carries the new snapshots and schemas, not data: far below this."""


def make_app(handler: RestCatalogHandler, executor: ThreadPoolExecutor) -> web.Application:
    """Every path to ``handler.handle``, run on ``executor``."""

    async def answer(request: web.Request) -> web.StreamResponse:
        body = await request.read() if request.can_read_body else b""
        query = {k: v for k, v in request.query.items()}
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(executor, handler.handle,
                                            request.method, request.rel_url.raw_path, query,
                                            body)
        if result.body is None or request.method == "HEAD":
            return web.Response(status=result.status)
        return web.Response(status=result.status, body=result.body,
                            content_type="application/json")

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


async def serve(settings: CatalogSettings, host: str, port: int,
                ready: Callable[[int], None] | None = None) -> None:
    """Serve the catalog of ``settings`` until cancelled or SIGTERM; ``ready(port)`` once
    bound.  The catalog is opened (its SQL tables created if missing) before the port is
    bound, so that a catalog that cannot be opened is an error at start.  On the way out the
    request in progress finishes (a commit is not cut between its metadata file and the
    catalog's update)."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="iceberg-rest")
    loop = asyncio.get_running_loop()
    try:
        handler = await loop.run_in_executor(executor, _open, settings)
        runner = web.AppRunner(make_app(handler, executor), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            bound = runner.addresses[0][1] if runner.addresses else port
            if ready is not None:
                ready(bound)
            stop = asyncio.Event()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            try:
                await stop.wait()
            finally:
                loop.remove_signal_handler(signal.SIGTERM)
        finally:
            await runner.cleanup()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _open(settings: CatalogSettings) -> RestCatalogHandler:
    from weir.tables.catalog import load_catalog
    from weir.tables.rest_catalog import RestCatalogHandler

    return RestCatalogHandler(load_catalog(settings))
