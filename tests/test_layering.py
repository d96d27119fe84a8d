"""The import direction is gateway -> compat -> core, never back (checked on the source, with ast).

Every layer is imported as ``rokka.<layer>``: a bare ``import core`` (or gateway, compat, pipeline)
anywhere in the project would load a second copy of the module under another name.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "core": ("gateway", "compat", "pipeline"),
    "compat": ("gateway", "pipeline"),
    "gateway": ("pipeline",),
}


LAYERS = ("core", "gateway", "compat", "pipeline")
SOURCE_DIRS = (*LAYERS, "rokka", "tests", "interop", "benchmarks")


def _modules(path: Path) -> set[str]:
    """Absolute module names imported by ``path``."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _imports(path: Path) -> set[str]:
    """The rokka layers ``path`` imports (``rokka.core.x`` -> ``core``)."""
    return {name.split(".")[1] for name in _modules(path) if name.startswith("rokka.") and name.count(".") >= 1}


def test_layers_are_imported_under_rokka_only() -> None:
    bad = []
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in _modules(path):
                if name.split(".")[0] in LAYERS:
                    bad.append(f"{path.relative_to(ROOT)} imports {name} (use rokka.{name})")
    for path in sorted(ROOT.glob("*.py")):
        bad.extend(f"{path.name} imports {n}" for n in _modules(path) if n.split(".")[0] in LAYERS)
    assert not bad, "\n".join(bad)


def test_layers_import_downwards_only() -> None:
    bad = []
    for layer, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            for name in _imports(path) & set(forbidden):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_upstream_kafka_schemas_are_not_copied() -> None:
    copied = [p for p in ROOT.rglob("*.json")
              if ".venv" not in p.parts and "node_modules" not in p.parts
              and '"validVersions"' in p.read_text("utf-8", errors="replace")]
    assert not copied
