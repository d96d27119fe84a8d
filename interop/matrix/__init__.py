"""The cross-client interop matrix of rokka (issue 6): producers x consumers x scenarios.

``python -m matrix`` (run from ``interop/``) or ``pytest interop/test_matrix.py`` runs it; see
``scenarios`` for what each scenario does, ``model`` for what a cell checks, ``clients`` for the
client drivers and ``table`` for the generated ``interop/MATRIX.md``.
"""
