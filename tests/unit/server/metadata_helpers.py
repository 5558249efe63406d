"""A Metadata handler's RequestContext over a MetadataCache, for the unit tests of the
Metadata memo and of the spliced answer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from weir.protocol import codec
from weir.server.context import RequestContext
from weir.server.handlers import REGISTRY
from weir.server.metadata_cache import MetadataCache

METADATA = 3


def metadata_context(cache: MetadataCache, version: int, authorizer: Any = None
                     ) -> tuple[RequestContext, type]:
    """(context, request class) of a Metadata request at ``version`` answered from ``cache``."""
    broker = SimpleNamespace(metadata=cache, authorizer=authorizer, cluster_id="c",
                             config=SimpleNamespace(auto_create_topics_enable=False,
                                                    get=lambda key: None))
    request_cls, response_cls = REGISTRY[METADATA].schemas(version)
    header = codec.RequestHeader(METADATA, version, 1, "test", 0)
    ctx = RequestContext(broker, header, request_cls, response_cls, "10.1.2.3:5555",
                         listener="PLAINTEXT")
    return ctx, request_cls
