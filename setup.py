"""Native helpers for the hot paths, each with a pure-Python twin (used when a build fails).

Metadata lives in pyproject.toml; this file only declares the C extensions.
"""

import ctypes.util

from setuptools import Extension, setup


def _crc32_backend() -> dict[str, list]:  # type: ignore[type-arg]
    """libdeflate's CRC-32 when its shared library is installed (Debian: libdeflate0), else zlib's."""
    lib = ctypes.util.find_library("deflate")  # e.g. "libdeflate.so.0"; the -dev symlink need not exist
    if lib:
        return {"define_macros": [("ROKKA_LIBDEFLATE", "1")], "extra_link_args": [f"-l:{lib}"]}
    return {"libraries": ["z"]}


setup(ext_modules=[
    Extension("core.storage._cstore", ["core/storage/_cstore.c"], optional=True, extra_compile_args=["-O2"],
              **_crc32_backend()),
    Extension("core.storage._cwarm", ["core/storage/_cwarm.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("compat._cfetch", ["compat/_cfetch.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("gateway.kafka.codec._crecords", ["gateway/kafka/codec/_crecords.c"], optional=True,
              extra_compile_args=["-O2"]),
])
