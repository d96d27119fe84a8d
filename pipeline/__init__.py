"""rokka's PySpark (>= 4) connector: ``spark.read.format("rokka")`` / ``df.write.format("rokka")``.

``from rokka.pipeline import register; register(spark)`` makes the short name ``rokka`` known to a
SparkSession.  PySpark is an optional dependency (``pip install 'rokka[pipeline]'``), so it is
imported only when ``register`` is called: ``import rokka.pipeline`` works without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Make ``format("rokka")`` available in ``spark`` (a SparkSession)."""
    from rokka.pipeline.source import register as _register

    _register(spark)
