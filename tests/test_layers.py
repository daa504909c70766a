"""The package's layers: imports only point down, and no two subpackages import each other.

Walks every module's ``import``/``from`` statements (including those inside functions, which
are lazy but still a dependency) with :mod:`ast`, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import livecam

ROOT = Path(livecam.__file__).parent

# Bottom up. A package may import its own layer's packages only where listed in SIDEWAYS,
# and any package of a lower layer.
LAYERS: list[set[str]] = [
    {"core"},
    {"config"},
    {"track", "engines", "capture", "output"},
    {"analysis"},
    {"identity"},
    {"swap"},
    {"control", "testing"},
    {"pipeline", "gpupipe"},
    {"daemon", "app", "remote"},
    {"subcommands", "cli"},
]
# Same-layer imports that are allowed (importer -> imported): the runtime hands work to the GPU
# pipeline's stage, and the daemon builds its app.
SIDEWAYS = {("gpupipe", "pipeline"), ("daemon", "app")}
LEVEL = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _top(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "livecam" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT.parent).with_suffix("")
    package = ".".join(rel.parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        src = rel.parts[0].removesuffix(".py")
        if src == "__init__":
            continue
        for module in _imports(path):
            dst = _top(module)
            if dst is None or dst == src or dst in ("__version__",):
                continue
            if not (ROOT / dst).is_dir() and not (ROOT / f"{dst}.py").exists():
                continue  # "from livecam import __version__" and the like
            edges.setdefault((src, dst), []).append(str(rel))
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    missing = sorted((packages | modules) - set(LEVEL))
    assert not missing, f"no layer for {missing}"


def test_imports_only_point_down() -> None:
    upward = [f"{src} -> {dst} ({', '.join(sorted(set(where)))})"
              for (src, dst), where in sorted(_edges().items())
              if LEVEL[dst] > LEVEL[src]
              or (LEVEL[dst] == LEVEL[src] and (src, dst) not in SIDEWAYS)]
    assert not upward, "imports that point up or sideways:\n" + "\n".join(upward)


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for src, dst in _edges():
        graph.setdefault(src, set()).add(dst)
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
