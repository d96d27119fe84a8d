"""Kafka producer ids: idempotent-producer state per partition (``state``) and its journal (``journal``)."""
