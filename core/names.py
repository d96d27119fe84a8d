"""Topic and group names: the one rule set both protocols apply to every name a client sends.

Theory of operation
-------------------
A topic name becomes a directory (``consumequeue/<topic>``) and a group name becomes the topics
``%RETRY%<group>`` and ``%DLQ%<group>``, so a name is the first thing checked on every request
that carries one.  The rules are the upstream ones:

* RocketMQ (TopicValidator / Validators, 4.9 and 5.x): ``^[%|a-zA-Z0-9_-]+$``, not blank, a topic
  at most 127 characters (a ``%RETRY%`` / ``%DLQ%`` topic at most 255, as RocketMQ 5.3 relaxed it),
  a group at most 255 (the 4.9 client's limit).  rokka also allows ``.`` in RocketMQ names,
  because the same store serves Kafka, whose topics often contain dots; a name made only of dots
  ("." or "..") is refused, as Kafka refuses it.
* Kafka (``org.apache.kafka.common.internals.Topic``): ``[a-zA-Z0-9._-]``, 1..249 characters,
  not "." or "..".  A Kafka group id is a free string in Kafka: it never names a file or a
  topic here (it keys the offset table only), so only what Kafka refuses (an empty id, answered
  INVALID_GROUP_ID by the coordinator) is refused.

``topic_problem`` / ``group_problem`` return None for a valid name, else the remark to send
(RocketMQ's wording, or Kafka's for ``kafka=True``).  ``refused`` logs one line
``<protocol>.bad_name`` for a refusal, so every gateway reports the same way.  Names already in
the tables (created before these checks) keep working for reads; the store itself refuses any
path outside its root whatever the name (``rokka.core.storage.paths``).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import structlog
from rokka.core.model import DLQ_PREFIX, RETRY_PREFIX

log = structlog.get_logger(__name__)

TOPIC_MAX_LENGTH = 127                 # RocketMQ TopicValidator.TOPIC_MAX_LENGTH
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255    # RocketMQ 5.3 TopicValidator.RETRY_OR_DLQ_TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 255                 # RocketMQ 4.9 Validators.CHARACTER_MAX_LENGTH
KAFKA_TOPIC_MAX_LENGTH = 249           # Kafka Topic.MAX_NAME_LENGTH
RESERVED = frozenset({".", ".."})
ROCKETMQ_PATTERN = "^[%|a-zA-Z0-9_-]+$"
_ROCKETMQ_CHARS = re.compile(r"[%|a-zA-Z0-9_.\-]+")
_ROCKETMQ_STRICT = re.compile(r"[%|a-zA-Z0-9_\-]+")
_KAFKA_CHARS = re.compile(r"[a-zA-Z0-9._\-]+")


@functools.lru_cache(maxsize=4096)     # a send checks its topic's name every time: answered from here after the first
def topic_problem(name: str | None, *, kafka: bool = False, allow_dot: bool = True) -> str | None:
    """None when ``name`` is a valid topic name, else why not (RocketMQ's remark, Kafka's with ``kafka``).

    ``allow_dot=False`` applies RocketMQ's pattern exactly (no ``.``)."""
    if kafka:
        return _kafka_topic_problem(name)
    if name is None or not name.strip():
        return "The specified topic is blank."
    chars = _ROCKETMQ_CHARS if allow_dot else _ROCKETMQ_STRICT
    if not chars.fullmatch(name):
        return f"The specified topic[{name}] contains illegal characters, allowing only {ROCKETMQ_PATTERN}"
    if name in RESERVED:
        return f"The specified topic[{name}] is reserved: '.' and '..' are not allowed"
    limit = RETRY_OR_DLQ_TOPIC_MAX_LENGTH if name.startswith((RETRY_PREFIX, DLQ_PREFIX)) else TOPIC_MAX_LENGTH
    if len(name) > limit:
        return f"The specified topic[{name}] is longer than topic max length {limit}."
    return None


@functools.lru_cache(maxsize=4096)     # asked for every produced and fetched partition
def _kafka_topic_problem(name: str | None) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in RESERVED:
        return 'Topic name cannot be "." or ".."'
    if len(name) > KAFKA_TOPIC_MAX_LENGTH:
        return (f"Topic name is illegal, it can't be longer than {KAFKA_TOPIC_MAX_LENGTH} characters, "
                f"topic name: {name}")
    if not _KAFKA_CHARS.fullmatch(name):
        return (f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
                "'.', '_' and '-'")
    return None


def group_problem(name: str | None) -> str | None:
    """None when ``name`` is a valid RocketMQ consumer group, else why not (RocketMQ 5's remark).

    The group's ``%RETRY%`` / ``%DLQ%`` topics must be valid topics too (at most 255 characters)."""
    if name is None or not name.strip():
        return "The specified group is blank."
    if not _ROCKETMQ_CHARS.fullmatch(name):
        return f"The specified group: {name}, contains illegal characters, allowing only {ROCKETMQ_PATTERN}"
    if name in RESERVED:
        return f"The specified group: {name}, is reserved: '.' and '..' are not allowed"
    if len(name) > GROUP_MAX_LENGTH:
        return f"The specified group: {name}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None


def consumer_group_problem(name: str | None) -> str | None:
    """``group_problem``, and the group's ``%RETRY%`` topic must be a valid topic (consumers need it)."""
    if (why := group_problem(name)) is not None:
        return why
    return topic_problem(RETRY_PREFIX + str(name))


def store_topic_problem(name: str | None) -> str | None:
    """The loosest rule, for the topic table itself: any name either protocol may create.

    Names pass when valid for RocketMQ (dots allowed) or for Kafka; this is the last check before
    a topic is added, whoever asks."""
    if topic_problem(name) is None or topic_problem(name, kafka=True) is None:
        return None
    return topic_problem(name)


class InvalidNameError(ValueError):
    """A topic or group name no protocol allows (raised by the tables, after the gateways checked)."""


def refused(protocol: str, kind: str, name: Any, reason: str, **fields: Any) -> str:
    """Log the refusal of a name as one ``<protocol>.bad_name`` line; returns ``reason``."""
    shown = name if isinstance(name, str) and len(name) <= 300 else repr(name)[:300]
    log.warning(f"{protocol}.bad_name", kind=kind, name=shown, reason=reason[:200], **fields)
    return reason
