"""``rokka pipeline ...``: run the Spark pipelines of ``pipeline/jobs`` (needs the ``[pipeline]`` extra).

A job runs in its own Python process (``python -m pipeline.jobs.<job> ARGS``), the way
spark-submit runs a driver: Spark's JVM lives and dies with that process, and this module does
not import the pipeline package (gateway never imports pipeline; see tests/test_layering.py).
"""

from __future__ import annotations

import importlib.util
import pkgutil
import subprocess
import sys

import click

JOBS_PACKAGE = "rokka.pipeline.jobs"


def available_jobs() -> list[str]:
    spec = importlib.util.find_spec(JOBS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations) if not m.ispkg)


@click.group()
def pipeline() -> None:
    """Spark pipelines on rokka (PySpark >= 4, local mode by default)."""


@pipeline.command("list")
def list_jobs() -> None:
    """List the jobs ``rokka pipeline run`` knows."""
    for job in available_jobs():
        click.echo(job)


@pipeline.command("run", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                           "help_option_names": []})
@click.argument("job")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(job: str, args: tuple[str, ...]) -> None:
    """Run JOB with ARGS (``rokka pipeline run order_events --help`` shows the job's options)."""
    jobs = available_jobs()
    name = job.replace("-", "_")
    if name not in jobs:
        raise click.UsageError(f"unknown job {job!r}; available: {', '.join(jobs) or 'none'}")
    if importlib.util.find_spec("pyspark") is None:
        raise click.ClickException("pyspark is not installed: pip install -e '.[pipeline]'")
    code = subprocess.call([sys.executable, "-m", f"{JOBS_PACKAGE}.{name}", *args])
    sys.exit(code)
