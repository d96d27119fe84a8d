"""``rokka`` command line: serve, namesrv, broker, admin.

The contract used by external checks (keep it exact):
  rokka serve [--data-dir DIR] [--host H] [--namesrv-port N] [--broker-port N] [--kafka-port N] [-c broker.conf]
              [--brokers N|auto]
  rokka namesrv [--port N]
  rokka broker -n H:P[;H:P] [--broker-name ...] [--cluster ...] [serve flags]
When every listener is up, one line goes to stdout and is flushed:
  rokka ready namesrv=H:P broker=H:P kafka=H:P   (each role prints the parts it runs)
With --brokers N > 1 (rokka.gateway.supervisor) broker= and kafka= list every broker, comma-separated,
in broker order: broker i listens on broker-port + 4*i and kafka-port + i.
Precedence: built-in defaults < broker.conf (-c) < command-line flags.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import structlog
from rokka.core.config import BrokerConfig, load_broker_conf
from rokka.net.logs import configure_logging

log = structlog.get_logger("rokka")

_LOG_OPTS = [
    click.option("--log-format", type=click.Choice(["auto", "console", "plain", "json"]), default="auto",
                 show_default=True, help="Log format on stderr."),
    click.option("--log-level", default="info", show_default=True),
]


def _with(opts: list[Any]):  # noqa: ANN202 - decorator helper
    def deco(f):  # noqa: ANN001, ANN202
        for opt in reversed(opts):
            f = opt(f)
        return f
    return deco


_BROKER_OPTS = [
    click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Store root (storePathRootDir). Default ./data"),
    click.option("--host", default=None, help="Listen address. Default 127.0.0.1"),
    click.option("--broker-port", type=int, default=None, help="RocketMQ broker port (listenPort), 0 = free port. "
                 "The VIP port is broker-port - 2. Default 10911"),
    click.option("--kafka-port", type=int, default=None, help="Kafka port, 0 = free port. Default 9092"),
    click.option("-c", "--config", "conf", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                 default=None, help="RocketMQ broker.conf (Java properties)."),
    click.option("--broker-name", default=None, help="brokerName (default broker-a)"),
    click.option("--cluster", default=None, help="brokerClusterName (default DefaultCluster)"),
    click.option("--broker-id", type=int, default=None, help="brokerId (0 = master)"),
    click.option("--flush-disk-type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]), default=None),
    click.option("--repair", "store_repair", is_flag=True, default=None,
                 help="Truncate a damaged CommitLog at the damage (records after it are lost) instead of "
                      "refusing to start."),
]


def build_config(conf: Path | None, *, data_dir: Path | None = None, host: str | None = None,
                 broker_port: int | None = None, kafka_port: int | None = None,
                 broker_name: str | None = None, cluster: str | None = None, broker_id: int | None = None,
                 namesrv: str | None = None, flush_disk_type: str | None = None,
                 store_repair: bool | None = None) -> BrokerConfig:
    """Defaults, then the broker.conf file, then flags.  Raises click.UsageError on bad input."""
    cfg = BrokerConfig()
    if conf is not None:
        try:
            cfg, unknown = load_broker_conf(conf, cfg)
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"cannot use {conf}: {exc}") from None
        for key in unknown:
            log.warning("unknown broker.conf key ignored", key=key, file=str(conf))
        cfg.extra["brokerConfigPath"] = str(conf.resolve())   # UPDATE_BROKER_CONFIG rewrites this file
    overrides = {"store_path_root_dir": str(data_dir) if data_dir is not None else None,
                 "listen_host": host, "listen_port": broker_port, "kafka_listen_port": kafka_port,
                 "broker_name": broker_name, "broker_cluster_name": cluster, "broker_id": broker_id,
                 "namesrv_addr": namesrv, "flush_disk_type": flush_disk_type, "store_repair": store_repair}
    for attr, value in overrides.items():
        if value is not None:
            setattr(cfg, attr, value)
    try:
        cfg.validate()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return cfg


@click.group()
@click.version_option(package_name="rokka")
def main() -> None:
    """rokka: a RocketMQ broker + name server and a Kafka broker on one store."""


@main.command()
@_with(_BROKER_OPTS)
@click.option("--namesrv-port", type=int, default=9876, show_default=True, help="Name server port, 0 = free port")
@click.option("--brokers", "brokers", default="1", show_default=True,
              help="Broker processes (one core each), or 'auto' = one per core. 1: one process, as always; "
                   "N > 1: a name server and N brokers (data-dir/broker-<i>, ports broker-port + 4*i and "
                   "kafka-port + i) under one supervisor.")
@_with(_LOG_OPTS)
def serve(namesrv_port: int, brokers: str, log_format: str, log_level: str, conf: Path | None,
          **flags: Any) -> None:
    """Name server + broker (RocketMQ and Kafka listeners) in one process, or N brokers (--brokers)."""
    configure_logging(log_format, log_level)
    from rokka.gateway.supervisor import resolve_brokers

    try:
        n = resolve_brokers(brokers)
    except ValueError as exc:
        raise click.UsageError(f"--brokers: {exc}") from None
    cfg = build_config(conf, **flags)
    if n > 1:
        sys.exit(_serve_cluster(n, cfg, namesrv_port, conf, flags, log_format, log_level))
    from rokka.gateway.runtime import run_roles

    sys.exit(run_roles(cfg, namesrv_port=namesrv_port, run_broker=True))


def _serve_cluster(n: int, cfg: BrokerConfig, namesrv_port: int, conf: Path | None, flags: dict[str, Any],
                   log_format: str, log_level: str) -> int:
    from rokka.gateway.supervisor import ClusterSpec, run_cluster

    if cfg.kafka_node_id:
        raise click.UsageError("kafkaNodeId cannot be set with --brokers > 1 (each broker derives its own)")
    if flags.get("broker_name") is not None or flags.get("broker_id") not in (None, 0):
        raise click.UsageError("--broker-name / --broker-id cannot be set with --brokers > 1 "
                               "(the brokers are broker-0 .. broker-<N-1>, all masters)")
    args = ["--cluster", cfg.broker_cluster_name, "--flush-disk-type", cfg.flush_disk_type]
    if conf is not None:
        args += ["-c", str(conf.resolve())]
    if cfg.store_repair:
        args.append("--repair")
    spec = ClusterSpec(brokers=n, data_dir=Path(cfg.store_path_root_dir).resolve(), host=cfg.listen_host,
                       namesrv_port=namesrv_port, broker_port=cfg.listen_port, kafka_port=cfg.kafka_listen_port,
                       broker_args=args, log_args=["--log-format", log_format, "--log-level", log_level])
    return run_cluster(spec)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=None, help="0 = free port [default: listenPort of -c, else 9876]")
@click.option("-c", "--config", "conf", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="namesrv.properties (RocketMQ keys; also where UPDATE_NAMESRV_CONFIG persists).")
@_with(_LOG_OPTS)
def namesrv(host: str, port: int | None, conf: Path | None, log_format: str, log_level: str) -> None:
    """Run only the name server (KV config in kvConfigPath, default ~/namesrv/kvConfig.json)."""
    from rokka.core.namesrv.config import NamesrvConfig, load_namesrv_conf

    configure_logging(log_format, log_level)
    try:
        ns_cfg = load_namesrv_conf(conf) if conf is not None else NamesrvConfig()
    except (OSError, ValueError) as exc:
        raise click.UsageError(f"cannot use {conf}: {exc}") from None
    cfg = BrokerConfig(listen_host=host)
    from rokka.gateway.runtime import run_roles

    sys.exit(run_roles(cfg, namesrv_port=ns_cfg.listen_port if port is None else port, run_broker=False,
                       namesrv_config=ns_cfg))


@main.command()
@click.option("-n", "--namesrv", "namesrv_addr", default=None, help="Name servers, H:P[;H:P]")
@click.option("--shared-config-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of state shared by brokers on this machine (Kafka ACLs); set by serve --brokers.")
@_with(_BROKER_OPTS)
@_with(_LOG_OPTS)
def broker(namesrv_addr: str | None, shared_config_dir: Path | None, log_format: str, log_level: str,
           conf: Path | None, **flags: Any) -> None:
    """Run only a broker that registers with the given name servers."""
    configure_logging(log_format, log_level)
    cfg = build_config(conf, namesrv=namesrv_addr, **flags)
    if shared_config_dir is not None:
        from rokka.gateway.kafka.shared_acls import SHARED_DIR_KEY

        cfg.extra[SHARED_DIR_KEY] = str(shared_config_dir.resolve())
    if not cfg.namesrv_addrs:
        raise click.UsageError("a broker needs name servers: -n H:P[;H:P] or namesrvAddr in broker.conf")
    from rokka.gateway.kafka.cluster_topics import PRODUCER_ID_BASE_KEY, producer_id_base

    # A cluster member hands out Kafka producer ids from its own range (rokka serve: from 0).
    cfg.extra.setdefault(PRODUCER_ID_BASE_KEY, str(producer_id_base(cfg.broker_name)))
    from rokka.gateway.runtime import run_roles

    sys.exit(run_roles(cfg, namesrv_port=None, run_broker=True))


def _register_admin() -> None:
    try:
        from rokka.gateway.cli.admin import admin
    except ImportError:  # pragma: no cover - admin is optional while being built
        return
    main.add_command(admin)


_register_admin()
from rokka.gateway.cli.pipeline_cmd import pipeline  # noqa: E402 - Spark jobs run in a subprocess

main.add_command(pipeline)

if __name__ == "__main__":  # pragma: no cover
    main()
