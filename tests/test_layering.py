"""The import direction is gateway -> compat -> core, never back (checked on the source, with ast)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "core": ("gateway", "compat", "pipeline"),
    "compat": ("gateway", "pipeline"),
    "gateway": ("pipeline",),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


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
