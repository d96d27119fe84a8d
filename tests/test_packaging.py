"""The installed wheel puts one top-level package, ``rokka``, into a user's environment.

Theory of operation
-------------------
rokka's layer folders (``core/``, ``gateway/``, ``compat/``, ``pipeline/``) sit at the top of the
repository but install as ``rokka.core``, ``rokka.gateway``, ... (setup.py's ``package_dir``).  A
user's own top-level ``core`` or ``pipeline`` package (common names in data projects) must neither
shadow rokka's modules nor be shadowed by them.  The test builds the real wheel, installs it into a
fresh venv, puts dummy top-level ``core`` and ``pipeline`` packages first on ``PYTHONPATH``, and
then runs ``rokka serve`` from that venv and a Spark read through ``format("rokka")``.

The fresh venv gets the wheel alone (``--no-deps``); its dependencies (trio, pyspark, ...) come from
the test venv through a plain path line in a ``.pth`` file, which does not process the test venv's
own ``.pth`` files, so the editable install of the working tree stays out of the fresh venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.harness import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("core", "net", "gateway", "compat", "pipeline")


def _source_copy(dest: Path) -> Path:
    """The working tree's files (tracked, and untracked but not ignored) copied to ``dest``.

    The build runs there, not in the checkout: setuptools builds in place (``build/``, ``*.egg-info``),
    and with ``-n 2`` both pytest workers build this module's wheel at once, each for its own tests;
    two builds in one ``build/`` race (CI once failed that way). The copy also leaves out whatever
    a developer's earlier builds left in the checkout, as a fresh clone would.
    """
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True, timeout=60).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():                  # a tracked file deleted in the working tree is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = _source_copy(tmp_path_factory.mktemp("source"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(out), str(src)], capture_output=True, text=True, timeout=600, cwd=out)
    if built.returncode:
        pytest.fail(f"pip wheel exited {built.returncode}; its output ends:\n"
                    f"{(built.stdout + built.stderr)[-4000:]}", pytrace=False)
    (found,) = out.glob("rokka-*.whl")
    return found


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A venv holding only the wheel, with dummy ``core`` / ``pipeline`` packages first on the path."""
    base = tmp_path_factory.mktemp("fresh")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=300)
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    (Path(site) / "rokka_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    user = base / "user_project"
    for name in ("core", "pipeline"):
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(f"WHO = 'user {name}'\n")
    (user / "pipeline" / "source.py").write_text("def register(spark):\n    raise RuntimeError('user module')\n")
    env = {**os.environ, "PYTHONPATH": str(user), "PYSPARK_PYTHON": str(py), "PYSPARK_DRIVER_PYTHON": str(py)}
    yield venv, env


def test_wheel_has_no_top_level_module_but_rokka(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
        names = zf.namelist()
    assert {t for t in tops if not t.endswith((".dist-info", ".data"))} == {"rokka"}
    for layer in LAYERS:
        assert f"rokka/{layer}/__init__.py" in names
    native = [n for n in names if n.endswith(".so")]
    assert native, "the C helpers are built into the wheel"
    assert all(n.startswith("rokka/") for n in native)


def test_installed_rokka_beside_user_packages(fresh_venv: tuple[Path, dict[str, str]]) -> None:
    venv, env = fresh_venv
    script = textwrap.dedent("""
        import core, pipeline
        import rokka.core, rokka.gateway, rokka.compat, rokka.pipeline
        from rokka.pipeline import register
        from rokka.core.storage import _cstore
        assert core.WHO == 'user core' and pipeline.WHO == 'user pipeline', (core, pipeline)
        for mod in (rokka.core, rokka.gateway, rokka.compat, rokka.pipeline, _cstore):
            assert '/site-packages/rokka/' in mod.__file__, mod.__file__
        import importlib.util
        for name in ('gateway', 'compat'):
            assert importlib.util.find_spec(name) is None, name
        print('ok')
    """)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", script], env=env, cwd=venv.parent,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_installed_rokka_serves_and_spark_reads(fresh_venv: tuple[Path, dict[str, str]],
                                                tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="pyspark>=4 is needed: pip install -e '.[pipeline]'")
    venv, env = fresh_venv
    rokka = str(venv / "bin" / "rokka")
    data = tmp_path / "data"

    def argv(ports: dict[str, int]) -> list[str]:
        return [rokka, "serve", "--data-dir", str(data), "--host", "127.0.0.1",
                "--namesrv-port", str(ports.get("namesrv", 0)), "--broker-port", str(ports.get("broker", 0)),
                "--kafka-port", str(ports.get("kafka", 0))]

    extra = {k: env[k] for k in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    srv = ServerProcess("rokka-from-wheel", argv, tmp_path, data_dir=data, env=extra).start()
    try:
        job = textwrap.dedent(f"""
            import trio
            from pyspark.sql import SparkSession
            from rokka.net.remoting.client import NamesrvClient, OutMessage, Producer, RemotingClient
            from rokka.pipeline import register

            async def produce():
                with trio.fail_after(60):
                    async with RemotingClient() as rc:
                        p = Producer(rc, NamesrvClient(rc, {srv.namesrv!r}), "wheel_pg")
                        await p.send_batch("WheelT", [OutMessage(b"m%d" % i) for i in range(5)])
            trio.run(produce)
            spark = (SparkSession.builder.master("local[1]").appName("rokka-wheel")
                     .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
                     .getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            register(spark)
            rows = spark.read.format("rokka").option("namesrv", {srv.namesrv!r}).option("topic", "WheelT").load()
            print(sorted(bytes(r.body).decode() for r in rows.collect()))
            spark.stop()
        """)
        out = subprocess.run([str(venv / "bin" / "python"), "-c", job], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-4000:]
        assert out.stdout.strip().splitlines()[-1] == str([f"m{i}" for i in range(5)])
    finally:
        srv.stop_clean()
