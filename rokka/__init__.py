"""rokka: a RocketMQ broker + name server and a Kafka broker on one RocketMQ-format store.

The repository keeps its layers as top-level folders (``core/``, ``gateway/``, ``compat/``,
``pipeline/``); they are installed and imported only as ``rokka.core``, ``rokka.gateway``,
``rokka.compat`` and ``rokka.pipeline`` (pyproject's ``package-dir`` mapping), so rokka puts
no generic top-level names into a user's environment.
"""
