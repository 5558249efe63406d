"""The one handler contract (weir.server.handlers): every API's ``handle(ctx, request)``,
typed, answering now or with an awaitable; the socket server's two stages through the
real Dispatcher."""

from __future__ import annotations

import asyncio
import inspect
import re
import struct
import types
from dataclasses import replace
from types import SimpleNamespace

from weir.protocol import codec
from weir.server import network
from weir.server.context import RawResponse
from weir.server.handlers import REGISTRY
from weir.server.network import Dispatcher


def test_every_handler_has_the_one_typed_contract():
    assert len(REGISTRY) == 51
    for api in REGISTRY.values():
        signature = inspect.signature(api.handle)
        ctx, request = signature.parameters.values()
        request_cls = api.schemas(api.max_version)[0]
        assert (ctx.name, ctx.annotation) == ("ctx", "RequestContext"), api.name
        assert (request.name, request.annotation) == ("request", request_cls.__name__), api.name
        assert signature.return_annotation in ("Response", "Answer"), api.name
        # the annotation names the class where it is defined (under TYPE_CHECKING)
        source = " ".join(re.sub(r"[(),]", " ", inspect.getsource(api.module)).split())
        assert f"from {request_cls.__module__} import {request_cls.__name__}" in source
        assert not hasattr(api.module, "handle_now"), api.name
    assert {key for key, api in REGISTRY.items() if api.pipelined} == {0}  # Produce


def test_no_api_is_special_to_the_socket_server():
    source = inspect.getsource(network)
    for name in ("NOT_NOW", "_PRODUCE", "produce_request", "handle_now", "answer_now"):
        assert name not in source


def _api_versions_frame(version: int) -> bytes:
    body = struct.pack(">hhih", codec.API_VERSIONS_KEY, version, 7, -1)
    return struct.pack(">i", len(body)) + body


def test_dispatcher_frames_a_response_given_now_and_one_given_later(monkeypatch):
    """A handler may answer in its call (a plain function) or with an awaitable (an
    ``async def``): ``begin`` frames the first at once and gives a coroutine for the
    second; ``dispatch`` runs both stages either way."""
    api = REGISTRY[codec.API_VERSIONS_KEY]
    request_cls, response_cls = api.schemas(0)

    def now(ctx, request):
        return RawResponse(b"\x00\x00")  # the bytes of a body encoded by the handler

    async def later(ctx, request):
        await asyncio.sleep(0)
        return now(ctx, request)

    dispatcher = Dispatcher(SimpleNamespace())  # type: ignore[arg-type]
    frame = _api_versions_frame(0)[4:]
    key = (codec.API_VERSIONS_KEY, 0)
    monkeypatch.setitem(network._APIS, key,
                        (replace(api, handle=now), request_cls, response_cls, False))
    answered = dispatcher.begin(frame, "127.0.0.1:1")
    assert type(answered) is bytes
    monkeypatch.setitem(network._APIS, key,
                        (replace(api, handle=later), request_cls, response_cls, False))
    pending = dispatcher.begin(frame, "127.0.0.1:1")
    assert type(pending) is types.CoroutineType
    assert asyncio.run(pending) == answered
    assert asyncio.run(dispatcher.dispatch(frame, "127.0.0.1:1")) == answered
