"""Kafka views: RocketMQ subscriptions (tag or SQL92 filters) for Kafka consumers.

Theory of operation
-------------------
Kafka has no server-side filtering, so rokka gives a Kafka consumer a
RocketMQ subscription through a *view*: a Kafka topic name that reads a
source topic through a filter.  A view is created with any Kafka admin
client, as a topic with these configs (CreateTopics):

    rokka.view.topic        the source topic (required)
    rokka.view.filter       the expression: ``TagA || TagB`` or SQL92
    rokka.view.filter.type  TAG (default) or SQL92

A view has the source topic's partitions and offsets: offset N of the view
is offset N of the source, so offsets have gaps where records did not match
(exactly as on a compacted topic).  Fetch returns only matching records;
when a fetched range holds none, a control record at the last scanned offset
moves the consumer past it (consumers never show control records).  Produce
to a view goes to the source topic.  Committed group offsets of a view are
stored under the *source* topic, so a group can move between a RocketMQ
subscription and a Kafka view of the same data without losing its place.
Views are persisted in ``config/kafkaViews.json`` and removed with
DeleteTopics.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rokka.core.filter import EXPR_TAG, ExpressionFilter, SubscriptionParseError, build_subscription
from rokka.core.storage.metafile import read_json, write_json_atomic

CONFIG_TOPIC = "rokka.view.topic"
CONFIG_FILTER = "rokka.view.filter"
CONFIG_FILTER_TYPE = "rokka.view.filter.type"


@dataclass(frozen=True, slots=True)
class KafkaView:
    name: str
    topic: str
    expression: str = "*"
    expression_type: str = EXPR_TAG

    def make_filter(self) -> ExpressionFilter:
        return ExpressionFilter(build_subscription(self.topic, self.expression, self.expression_type))

    def configs(self) -> dict[str, str]:
        return {CONFIG_TOPIC: self.topic, CONFIG_FILTER: self.expression, CONFIG_FILTER_TYPE: self.expression_type}


def view_from_configs(name: str, configs: dict[str, str | None]) -> KafkaView | None:
    """A view when the CreateTopics configs ask for one, else None.

    Raises:
        ValueError: the view configs are incomplete or the expression does not parse.
    """
    if CONFIG_TOPIC not in configs:
        if CONFIG_FILTER in configs or CONFIG_FILTER_TYPE in configs:
            raise ValueError(f"{CONFIG_FILTER} needs {CONFIG_TOPIC}")
        return None
    topic = configs.get(CONFIG_TOPIC) or ""
    view = KafkaView(name, topic, configs.get(CONFIG_FILTER) or "*",
                     (configs.get(CONFIG_FILTER_TYPE) or EXPR_TAG).upper())
    if not topic:
        raise ValueError(f"{CONFIG_TOPIC} is empty")
    try:
        view.make_filter()
    except SubscriptionParseError as exc:
        raise ValueError(f"bad {CONFIG_FILTER}: {exc}") from None
    return view


class ViewRegistry:
    def __init__(self, config_dir: Path | None) -> None:
        self._path = None if config_dir is None else config_dir / "kafkaViews.json"
        self._views: dict[str, KafkaView] = {}
        self._filters: dict[str, ExpressionFilter] = {}
        data = read_json(self._path) if self._path else None
        for name, d in ((data or {}).get("views") or {}).items():
            self._views[name] = KafkaView(name, d["topic"], d.get("expression", "*"), d.get("expressionType", "TAG"))

    def get(self, name: str) -> KafkaView | None:
        return self._views.get(name)

    def filter_of(self, name: str) -> ExpressionFilter | None:
        view = self._views.get(name)
        if view is None:
            return None
        f = self._filters.get(name)
        if f is None:
            f = self._filters[name] = view.make_filter()
        return f

    def all(self) -> dict[str, KafkaView]:
        return dict(self._views)

    def put(self, view: KafkaView) -> None:
        self._views[view.name] = view
        self._filters.pop(view.name, None)
        self._persist()

    def delete(self, name: str) -> bool:
        if self._views.pop(name, None) is None:
            return False
        self._filters.pop(name, None)
        self._persist()
        return True

    def adopt(self, views: dict[str, KafkaView]) -> int:
        """Make the registry exactly ``views`` (a slave copying its master's); returns how many changed."""
        changed = {n for n in {*self._views, *views} if self._views.get(n) != views.get(n)}
        if changed:
            self._views = dict(views)
            for n in changed:
                self._filters.pop(n, None)
            self._persist()
        return len(changed)

    def _persist(self) -> None:
        if self._path is not None:
            write_json_atomic(self._path, {"views": {
                n: {"topic": v.topic, "expression": v.expression, "expressionType": v.expression_type}
                for n, v in self._views.items()}})
