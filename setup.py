"""Native helpers for the hot paths, each with a pure-Python twin (used when a build fails).

Metadata lives in pyproject.toml; this file only declares the C extensions.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("core.storage._cstore", ["core/storage/_cstore.c"], libraries=["z"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("core.storage._cwarm", ["core/storage/_cwarm.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("compat._cfetch", ["compat/_cfetch.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("gateway.kafka.codec._crecords", ["gateway/kafka/codec/_crecords.c"], optional=True,
              extra_compile_args=["-O2"]),
])
