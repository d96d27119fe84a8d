"""The ``rokka admin`` click group and how every command runs (one ``op_*`` coroutine, one document).

Theory of operation
-------------------
``admin`` is the click group; ``run(op, renderer, as_json, **kwargs)`` runs one ``admin_ops`` coroutine
under ``trio.run`` inside a fresh ``RemotingClient`` (nothing outlives the command) and prints the
returned dict as JSON or through ``renderer``.  Everything the user or the network can cause becomes
one ``error: ...`` line and exit code 1, never a traceback.  The command modules (``admin``,
``admin_acl``, ``admin_config``, ``admin_trace``) all hang their commands on this group, so none of them
imports another.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import click
import trio
from rokka.gateway.cli import admin_render as render
from rokka.gateway.cli.admin_ops import AdminError, Session
from rokka.net.logs import configure_logging
from rokka.net.remoting.client import (
    Admin,
    ChannelClosedError,
    ClientError,
    NamesrvClient,
    RemotingClient,
    RequestTimeoutError,
)

_USER_ERRORS = (AdminError, ClientError, RequestTimeoutError, ChannelClosedError, ValueError, OSError)


@dataclass
class AdminContext:
    namesrv: str
    json: bool
    timeout_s: float
    credentials: tuple[str, str] | None = None   # (accessKey, secretKey) for brokers with aclEnable
    tls: Any = None                              # ssl.SSLContext: TLS to every name server and broker


class TimestampType(click.ParamType):
    """ms since the epoch, ``now``, or an ISO 8601 date/time -> int ms."""

    name = "timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text.lower() == "now":
            return int(time.time() * 1000)
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            self.fail(f"{text!r} is not ms since the epoch, 'now' or an ISO 8601 time", param, ctx)


TIMESTAMP = TimestampType()


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")(f)


@click.group(name="admin")
@click.option("-n", "--namesrv", envvar="NAMESRV_ADDR", default="127.0.0.1:9876", show_default=True,
              help="Name servers, H:P[;H:P] (env NAMESRV_ADDR).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for every command.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Per-request timeout, seconds.")
@click.option("--log-level", default="error", show_default=True, help="Log level on stderr.")
@click.option("--access-key", envvar="ROKKA_ACCESS_KEY", default=None,
              help="ACL accessKey to sign requests with (env ROKKA_ACCESS_KEY; brokers with aclEnable).")
@click.option("--secret-key", envvar="ROKKA_SECRET_KEY", default=None, help="ACL secretKey (env ROKKA_SECRET_KEY).")
@click.option("--tls", is_flag=True, envvar="ROKKA_TLS", help="Connect with TLS (Java's -Dtls.enable=true).")
@click.option("--tls-trust-cert", envvar="ROKKA_TLS_TRUST_CERT", default=None,
              help="With --tls: PEM CA the servers' certificates must chain to (default: trust any).")
@click.pass_context
def admin(ctx: click.Context, namesrv: str, as_json: bool, timeout: float, log_level: str,
          access_key: str | None, secret_key: str | None, tls: bool, tls_trust_cert: str | None) -> None:
    """Administer topics, groups and messages (like RocketMQ's mqadmin)."""
    configure_logging("plain", log_level)
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("give both --access-key and --secret-key, or neither")
    from rokka.gateway.rocketmq.tls import client_context
    ctx.obj = AdminContext(namesrv, as_json, timeout,
                           (access_key, secret_key) if access_key and secret_key else None,
                           client_context(tls_trust_cert) if tls or tls_trust_cert else None)


async def _with_session(namesrv: str, timeout_s: float,
                        op: Callable[..., Awaitable[dict[str, Any]]],
                        kwargs: dict[str, Any], credentials: tuple[str, str] | None = None,
                        tls: Any = None) -> dict[str, Any]:
    async with RemotingClient(timeout_s=timeout_s, connect_timeout_s=min(timeout_s, 5.0),
                              credentials=credentials, tls=tls) as rc:
        ns = NamesrvClient(rc, namesrv)
        # Every request is bounded by ``timeout_s``; a long scan (printMsg) may take many of them.
        return await op(Session(rc, ns, Admin(rc, ns, timeout_s=timeout_s)), **kwargs)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return "timed out"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, AdminError | ClientError) else f"{type(exc).__name__}: {text}"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups from trio nurseries."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run(op: Callable[..., Awaitable[dict[str, Any]]], renderer: render.Renderer, as_json: bool,
        **kwargs: Any) -> None:
    """Run ``op`` against the name servers of the current context and print its document."""
    ctx = click.get_current_context()
    obj: AdminContext = ctx.find_object(AdminContext) or AdminContext("127.0.0.1:9876", False, 10.0)
    try:
        doc = trio.run(_with_session, obj.namesrv, obj.timeout_s, op, kwargs, obj.credentials, obj.tls)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line, never a traceback
        leaf = _leaf(exc)
        prefix = "" if isinstance(leaf, (*_USER_ERRORS, trio.TooSlowError)) else "internal error: "
        click.echo(f"error: {prefix}{_one_line(leaf)}", err=True)
        ctx.exit(1)
    if as_json or obj.json:
        click.echo(json.dumps(doc, ensure_ascii=False, sort_keys=False))
    else:
        click.echo(renderer(doc))
    sys.stdout.flush()


_json_option = json_option
