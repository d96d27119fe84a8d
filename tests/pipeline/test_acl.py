"""The Spark connector against a broker with RocketMQ ACL: ``accessKey``/``secretKey`` sign every
request of a write and a read; without them the broker's refusal reaches the query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop.harness import ServerProcess
from tests.pipeline.conftest import start_rokka

ACL = """\
accounts:
  - accessKey: spark-key
    secretKey: spark-secret-1234
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture
def acl_rokka(tmp_path: Path) -> Iterator[ServerProcess]:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    srv = start_rokka(tmp_path, ("aclEnable=true", f"plainAclFile={tmp_path / 'plain_acl.yml'}"))
    yield srv
    srv.stop_clean()


def test_signed_write_and_read(spark: Any, acl_rokka: ServerProcess) -> None:
    creds = {"accessKey": "spark-key", "secretKey": "spark-secret-1234"}
    df = spark.createDataFrame([(f"m{i}".encode(),) for i in range(20)], "body binary")
    df.write.format("rokka").option("namesrv", acl_rokka.namesrv).option("topic", "AclSpark").options(
        **creds).mode("append").save()
    rows = spark.read.format("rokka").option("namesrv", acl_rokka.namesrv).option("topic", "AclSpark").options(
        **creds).load().collect()
    assert sorted(r.body for r in rows) == sorted(f"m{i}".encode() for i in range(20))
    with pytest.raises(Exception, match="AclException: No accessKey is configured"):
        spark.read.format("rokka").option("namesrv", acl_rokka.namesrv).option("topic", "AclSpark").option(
            "retrySeconds", "0").load().collect()
    with pytest.raises(Exception, match="accessKey and secretKey go together"):
        spark.read.format("rokka").option("namesrv", acl_rokka.namesrv).option("topic", "AclSpark").option(
            "accessKey", "spark-key").load().collect()
