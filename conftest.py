"""Suite-wide rule: under CI, a skipped test is a failure.

``make test`` installs every client and tool the tests need, so on CI nothing may be skipped for
being "missing": a skip there would report a capability as tested when it was not.  The only
allowed skips are the interop matrix's ``n/a:`` cells (a client genuinely lacks the feature; the
table in README says so).  Locally (no ``CI`` variable) skips stay skips, so a developer without,
say, Spark can still run the rest.

Also here: hypothesis runs without per-example deadlines (profile ``rokka``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests check bytes and behaviour, never time: no per-example deadline (a loaded 2-core CI
# machine made a 200 ms deadline fail a codec round trip), and slow data generation is no failure.
settings.register_profile("rokka", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rokka")

ALLOWED_SKIP_PREFIX = "n/a:"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    outcome = yield
    report = outcome.get_result()
    if not os.environ.get("CI") or not report.skipped:
        return
    reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if reason.removeprefix("Skipped: ").startswith(ALLOWED_SKIP_PREFIX):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped under CI (everything must be installed by `make test`): {reason}"
