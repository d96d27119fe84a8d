"""RocketMQ name server: handlers over ``rokka.core.namesrv`` and its trio server."""

from rokka.gateway.namesrv.handlers import NamesrvHandlers
from rokka.gateway.namesrv.server import NamesrvServer

__all__ = ["NamesrvHandlers", "NamesrvServer"]
