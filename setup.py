"""Native helpers for the hot paths, each with a pure-Python twin (used when a build fails).

Metadata lives in pyproject.toml; this file declares the packages and the C extensions.

Packages: the layer folders (``core/``, ``gateway/``, ``compat/``, ``pipeline/``) stay at the top of
the repository but are installed only as ``rokka.core``, ``rokka.gateway``, ... (a ``package_dir``
mapping); ``rokka/`` holds the package's own ``__init__``.  Nothing else lands at the top level of
site-packages (tests/test_packaging.py builds the wheel and checks).
"""

import ctypes.util

from setuptools import Extension, find_packages, setup

LAYERS = ("core", "net", "gateway", "compat", "pipeline")


def _crc32_backend() -> dict[str, list]:  # type: ignore[type-arg]
    """libdeflate's CRC-32 when its shared library is installed (Debian: libdeflate0), else zlib's."""
    lib = ctypes.util.find_library("deflate")  # e.g. "libdeflate.so.0"; the -dev symlink need not exist
    if lib:
        return {"define_macros": [("ROKKA_LIBDEFLATE", "1")], "extra_link_args": [f"-l:{lib}"]}
    return {"libraries": ["z"]}


def _packages() -> tuple[list[str], dict[str, str]]:
    """Every package under the layer folders, named ``rokka.<layer>...``, and where each lives."""
    found = find_packages(include=[f"{layer}*" for layer in LAYERS])
    packages = ["rokka", *(f"rokka.{name}" for name in found)]
    package_dir = {"rokka": "rokka", **{f"rokka.{name}": name.replace(".", "/") for name in found}}
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()

setup(packages=PACKAGES, package_dir=PACKAGE_DIR, ext_modules=[
    Extension("rokka.core.storage._cstore", ["core/storage/_cstore.c"], optional=True, extra_compile_args=["-O2"],
              **_crc32_backend()),
    Extension("rokka.core.storage._cwarm", ["core/storage/_cwarm.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("rokka.core.storage._cqscan", ["core/storage/_cqscan.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("rokka.gateway.kafka.codec._cstored",
              ["gateway/kafka/codec/_cstored.c", "gateway/kafka/codec/_cstored_text.c"], optional=True,
              depends=["gateway/kafka/codec/_cstored_text.h"], extra_compile_args=["-O2"]),
    Extension("rokka.net.remoting.codec._cjsonhdr", ["net/remoting/codec/_cjsonhdr.c"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("rokka.gateway.kafka.codec._crecords", ["gateway/kafka/codec/_crecords.c"], optional=True,
              extra_compile_args=["-O2"]),
])
