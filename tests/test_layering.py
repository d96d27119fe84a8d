"""The import direction is gateway -> compat -> core, never back (checked on the source, with ast).

Every layer is imported as ``rokka.<layer>``: a bare ``import core`` (or gateway, compat, pipeline)
anywhere in the project would load a second copy of the module under another name.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "core": ("net", "gateway", "compat", "pipeline"),
    "net": ("gateway", "compat", "pipeline"),
    "compat": ("gateway", "pipeline"),
    "gateway": ("pipeline",),
}


LAYERS = ("core", "net", "gateway", "compat", "pipeline")
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


#: Import loops inside one layer that exist today (issue 22 lists them to be broken up); a loop may
#: only shrink: any other loop, or a module joining one of these, fails the test below.  ``core/`` has
#: none: the store's modules import the native extensions by their full name (``import
#: rokka.core.storage._cstore as _cstore``, not ``from rokka.core.storage import _cstore``, which is an
#: edge to the package and its re-exports), ``storage.admission`` owns the space check that
#: ``storage.retention`` calls, and ``core.filter`` imports ``core.sql92`` directly.
KNOWN_LOOPS: tuple[frozenset[str], ...] = ()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return "rokka." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports when it runs (function-local imports included, imports
    under ``if TYPE_CHECKING:`` left out); ``from pkg import mod`` names the submodule."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for sub in node.body for n in ast.walk(sub)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in known:
                    out.add(sub)
                elif node.module in known:
                    out.add(node.module)
    return out


def _loops(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_import_loops_inside_a_layer() -> None:
    for layer in LAYERS:
        paths = {_module_name(p): p for p in sorted((ROOT / layer).rglob("*.py"))}
        graph = {name: _runtime_imports(path, set(paths)) - {name} for name, path in paths.items()}
        new = [sorted(loop) for loop in _loops(graph) if not any(loop <= known for known in KNOWN_LOOPS)]
        assert not new, f"import loops in {layer}/: {new}"


def test_the_loop_finder_finds_a_loop() -> None:
    assert _loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


#: ``rokka.core.storage``'s modules that code outside ``core/`` may import: the package itself (the
#: store's door: ``MessageStore`` and its types, the engines, the refusals, replication) and the
#: persistence helpers.  The record format is ``rokka.core.record``.
PUBLIC_STORAGE = frozenset({"rokka.core.storage", "rokka.core.storage.metafile", "rokka.core.storage.packfile"})
#: Files outside ``core/`` that may still import the store's insides: none (the list may only stay empty).
STORAGE_INSIDES_ALLOWED: frozenset[tuple[str, str]] = frozenset()


def _storage_modules() -> set[str]:
    """Every module of ``rokka.core.storage``, native extensions included."""
    folder = ROOT / "core" / "storage"
    names = {p.name.split(".")[0] for p in folder.iterdir() if p.suffix in (".py", ".c", ".so")}
    return {f"rokka.core.storage.{n}" for n in names if n != "__init__"}


def _storage_imports(path: Path, inner: set[str]) -> set[str]:
    """The modules of ``rokka.core.storage`` that ``path`` imports (``from rokka.core.storage import
    layout`` names ``rokka.core.storage.layout``), at run time or for typing alike."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("rokka.core.storage"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rokka.core.storage":
                out.update(sub if (sub := f"{node.module}.{a.name}") in inner else node.module for a in node.names)
            elif node.module.startswith("rokka.core.storage."):
                out.add(node.module)
    return out


def _storage_insides_used() -> set[tuple[str, str]]:
    inner = _storage_modules()
    return {(str(path.relative_to(ROOT)), name)
            for layer in ("gateway", "compat", "pipeline") for path in sorted((ROOT / layer).rglob("*.py"))
            for name in _storage_imports(path, inner) if name not in PUBLIC_STORAGE}


def test_outside_core_only_the_stores_public_modules_are_imported() -> None:
    new = sorted(_storage_insides_used() - STORAGE_INSIDES_ALLOWED)
    assert not new, ("import these from rokka.core.storage (the store's door) or rokka.core.record (the "
                     f"record format), or make them public there: {new}")


def test_the_storage_import_finder_sees_every_form(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import rokka.core.storage.layout\nfrom rokka.core.storage import engine, DiskStore\n"
                   "from rokka.core.storage.api import RecordRun\nfrom rokka.core.record import decode_record\n")
    inner = _storage_modules()
    assert _storage_imports(src, inner) == {"rokka.core.storage.layout", "rokka.core.storage.engine",
                                            "rokka.core.storage", "rokka.core.storage.api"}
