"""Name server route registry (pure data, clock injected)."""

from rokka.core.namesrv.routes import (
    BROKER_EXPIRED_MS,
    BrokerData,
    QueueData,
    RegisterResult,
    RouteInfoManager,
    TopicConfigEntry,
)

__all__ = ["BROKER_EXPIRED_MS", "BrokerData", "QueueData", "RegisterResult", "RouteInfoManager",
           "TopicConfigEntry"]
