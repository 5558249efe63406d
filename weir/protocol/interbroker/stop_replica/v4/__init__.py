from .request import StopReplicaRequest
from .response import StopReplicaResponse

__all__ = (
    "StopReplicaRequest",
    "StopReplicaResponse",
)
