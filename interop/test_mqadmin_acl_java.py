"""The Java ``mqadmin`` ACL commands (rocketmq-tools 4.9.8 and 5.3.1) and deleteExpiredCommitLog against rokka.

``rokka serve`` with ``aclEnable`` and a ``plain_acl.yml`` of an admin account (``ops-key``) and an app
account; mqadmin signs with the account in ``$ROCKETMQ_HOME/conf/tools.yml`` (its ``AclClientRPCHook``),
one ``java -cp ... MQAdminStartup`` process per command, in order (each command changes the file the
next one reads): updateAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr, deleteAclConfig (twice:
the second is Java's DELETE_ACL_CONFIG_FAILED), deleteExpiredCommitLog; then the same updateAclConfig
signed by the app account is refused.  mqadmin exits 0 even when a command fails, so each check reads
its output; the file on disk is checked after the commands.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import harness
import pytest
import rmq_acl
import rmq_java
import yaml

NEW = ("java-user-1", "java-secret-1")


def mqadmin(line: str, home: Path, key: tuple[str, str], namesrv: str, *args: str) -> str:
    """Run one mqadmin command signed as ``key``; its stdout + stderr."""
    rocketmq_home = home / f"rmq-home-{key[0]}"
    if not rocketmq_home.exists():
        shutil.copytree(rmq_java.ROCKETMQ_HOME, rocketmq_home)
        (rocketmq_home / "conf" / "tools.yml").write_text(f"accessKey: {key[0]}\nsecretKey: {key[1]}\n")
    env = dict(rmq_java.mqadmin_env(home), ROCKETMQ_HOME=str(rocketmq_home))
    r = subprocess.run(rmq_java.mqadmin_argv(line, home, *args, "-n", namesrv), capture_output=True, text=True,
                       timeout=90, env=env, check=False)
    assert r.returncode == 0, f"mqadmin {args[0]} exit {r.returncode}\n{(r.stdout + r.stderr)[-3000:]}"
    return r.stdout + r.stderr


@pytest.mark.parametrize("version", sorted(rmq_java.LINES))
def test_mqadmin_acl_commands(version: str, configured_rokka: Callable[..., harness.ServerProcess],
                              tmp_path: Path) -> None:
    line = rmq_java.LINES[version]
    if (why := rmq_java.missing(line)) is not None:
        pytest.skip(why)
    srv = configured_rokka(*rmq_acl.acl_conf(rmq_acl.plain_acl(["Orders=PUB|SUB"])))
    acl_file = tmp_path / "server" / "plain_acl.yml"
    home = tmp_path / "home"
    home.mkdir()

    def run(*args: str, key: tuple[str, str] = rmq_acl.OPS) -> str:
        return mqadmin(line, home, key, srv.namesrv, *args)

    out = run("updateAclConfig", "-b", srv.broker, "-a", NEW[0], "-s", NEW[1], "-i", "SUB", "-u", "SUB",
              "-t", "Orders=PUB,Audit=DENY", "-g", "G1=SUB", "-m", "false")
    assert f"create or update plain access config to {srv.broker} success." in out, out
    account = next(a for a in yaml.safe_load(acl_file.read_text())["accounts"] if a["accessKey"] == NEW[0])
    assert (account["secretKey"], account["topicPerms"], account["groupPerms"], account["admin"]) == \
        (NEW[1], ["Orders=PUB", "Audit=DENY"], ["G1=SUB"], False)

    out = run("clusterAclConfigVersion", "-c", "DefaultCluster")
    rows = [ln.split() for ln in out.splitlines() if srv.broker in ln]
    assert "#AclConfigVersionNum" in out and len(rows) == 1, out
    assert rows[0][:5] == ["DefaultCluster", "broker-a", srv.broker, str(acl_file), "1"], out

    out = run("updateGlobalWhiteAddr", "-b", srv.broker, "-g", "10.10.103.*,192.168.0.*")
    assert f"update global white remote addresses to {srv.broker} success." in out, out
    assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["10.10.103.*", "192.168.0.*"]

    out = run("deleteAclConfig", "-b", srv.broker, "-a", NEW[0])
    assert f"delete plain access config account from {srv.broker} success." in out, out
    out = run("deleteAclConfig", "-b", srv.broker, "-a", NEW[0])
    assert "CODE: 210" in out and "has been deleted failed" in out, out

    out = run("deleteExpiredCommitLog", "-b", srv.broker)
    assert "success" in out and "Exception" not in out, out

    out = run("updateAclConfig", "-b", srv.broker, "-a", NEW[0], "-s", NEW[1], "-m", "true", key=rmq_acl.APP)
    assert "is not admin" in out and "success" not in out, out
    doc = yaml.safe_load(acl_file.read_text())
    assert [a["accessKey"] for a in doc["accounts"]] == [rmq_acl.OPS[0], rmq_acl.APP[0]]
    assert doc["dataVersion"][0]["counter"] == 3
