"""RocketMQ name server: handlers over ``core.namesrv`` and its trio server."""

from gateway.namesrv.handlers import NamesrvHandlers
from gateway.namesrv.server import NamesrvServer

__all__ = ["NamesrvHandlers", "NamesrvServer"]
