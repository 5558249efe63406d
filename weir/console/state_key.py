"""The aiohttp application key under which the console keeps its ``ConsoleState``
(:mod:`weir.console.server` sets it; the pages' and the actions' handlers read it).  A module
of its own, so the server and the actions do not import each other."""

from __future__ import annotations

from typing import Any

from aiohttp import web

STATE_KEY: web.AppKey[Any] = web.AppKey("console")
