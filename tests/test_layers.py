"""The package's layers: imports only point down, and no two subpackages import each other;
sub-packages (``gpupipe.networks``, ``gpupipe.swap``) are layers of their own, and no two files
import each other, however indirectly (a file circle).

Walks every module's ``import``/``from`` statements (including those inside functions and under
``TYPE_CHECKING``, which are lazy but still a dependency) with :mod:`ast`, so nothing is
imported to check it.
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
    # the GPU pipeline's torch twins of the face networks and of the swap's maths: below the
    # pipeline that drives them, above the CPU code they mirror
    {"gpupipe.networks", "gpupipe.swap"},
    {"control"},
    {"pipeline", "gpupipe"},
    {"daemon", "app", "remote"},
    {"subcommands"},
    {"cli"},  # the entry point: parses, dispatches to a subcommand, turns errors into exits
]
# Same-layer imports that are allowed (importer -> imported): the runtime hands work to the GPU
# pipeline's stage, the daemon builds its app, and the app builds the thin client's stage.
SIDEWAYS = {("gpupipe", "pipeline"), ("daemon", "app"), ("app", "remote")}
LEVEL = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


#: Sub-packages (``gpupipe.networks``): each is a unit of its own in the layers above.
SUBPACKAGES = {f"{p.parent.parent.name}.{p.parent.name}" for p in ROOT.glob("*/*/__init__.py")}


def _top(module: str) -> str | None:
    """The unit a dotted module belongs to: its sub-package, else its top-level package."""
    parts = module.split(".")
    if parts[0] != "livecam" or len(parts) < 2:
        return None
    if len(parts) > 2 and f"{parts[1]}.{parts[2]}" in SUBPACKAGES:
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def _unit(rel: Path) -> str:
    """The unit of a file, ``rel`` relative to the package root."""
    if len(rel.parts) > 2 and f"{rel.parts[0]}.{rel.parts[1]}" in SUBPACKAGES:
        return f"{rel.parts[0]}.{rel.parts[1]}"
    return rel.parts[0].removesuffix(".py")


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
        src = _unit(rel)
        if src == "__init__":
            continue
        for module in _imports(path):
            dst = _top(module)
            if dst is None or dst == src or dst in ("__version__",):
                continue
            if dst not in SUBPACKAGES and not (ROOT / dst).is_dir() \
                    and not (ROOT / f"{dst}.py").exists():
                continue  # "from livecam import __version__" and the like
            edges.setdefault((src, dst), []).append(str(rel))
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    missing = sorted((packages | modules | SUBPACKAGES) - set(LEVEL))
    assert not missing, f"no layer for {missing}"


def test_imports_only_point_down() -> None:
    upward = [f"{src} -> {dst} ({', '.join(sorted(set(where)))})"
              for (src, dst), where in sorted(_edges().items())
              if LEVEL[dst] > LEVEL[src]
              or (LEVEL[dst] == LEVEL[src] and (src, dst) not in SIDEWAYS)]
    assert not upward, "imports that point up or sideways:\n" + "\n".join(upward)


#: What the runtime (``pipeline``) may import: it runs what the composition root (``app``)
#: hands it, the fail-closed cover and the preview sink included, and picks nothing itself.
RUNTIME_IMPORTS = {"core", "config", "capture", "output"}


def test_the_runtime_imports_only_what_it_runs() -> None:
    picked = [f"pipeline -> {dst} ({', '.join(sorted(set(where)))})"
              for (src, dst), where in sorted(_edges().items())
              if src == "pipeline" and dst not in RUNTIME_IMPORTS]
    assert not picked, "the runtime picks what app.py should hand it:\n" + "\n".join(picked)


#: The factories that make one swap implementation (classic, neural, neural with Triton
#: requests in flight, GPU pipeline, remote server): only the composition root calls them, so
#: the choice between them is made there alone. ``livecam engines build`` prepares the GPU
#: pipeline whatever the library holds (``app.build_stages`` passes frames through while it is
#: empty). A subcommand builds its run with ``build_app``/``build_streams``, never the
#: ``App`` of stages it chose itself (the daemon names ``App`` as a type only).
PICKING = {"livecam.swap.build_classic_swap_stage", "livecam.swap.build_neural_swap_stage",
           "livecam.swap.neural_remote.RemoteSwapStage",
           "livecam.gpupipe.factory.build_gpu_stages", "livecam.remote.thin.RemoteSwapStage"}
PICKERS = {"app.py", "subcommands/engines.py"}


def test_only_the_composition_root_picks_the_stages() -> None:
    """Issue 43: ``livecam demo`` wired its own analysis and swap stages, source and sink;
    it goes through ``app.build_app`` like ``livecam run``."""
    picked = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        forbidden = PICKING | ({"livecam.app.App"} if rel.startswith("subcommands/") else set())
        if rel not in PICKERS:
            picked += [f"{rel} imports {name}" for name in sorted(_imports(path) & forbidden)]
    assert not picked, "stages picked outside livecam/app.py:\n" + "\n".join(picked)


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


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


def _file_graph() -> dict[str, set[str]]:
    """Module -> the livecam modules it imports (``from pkg import name`` counts as
    ``pkg.name`` where that is a module, else as ``pkg``)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    named.add(sub if sub in modules else module)
        found = set()
        for module in named:
            while module and module not in modules:
                module = module.rpartition(".")[0]
            if module and module != name:
                found.add(module)
        graph[name] = found
    return graph


def file_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                group.append(item)
                if item == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_a_file_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert file_circles(graph) == [["a", "b", "c"]]


def test_no_two_files_import_each_other() -> None:
    """Not even through others, lazily or for type hints only: a type both sides need moves
    down to a module both import (or a ``Protocol`` names what one side uses)."""
    circles = file_circles(_file_graph())
    assert not circles, "file circles: " + "; ".join(" <-> ".join(c) for c in circles)


#: Modules that no other module imports and that are still the product's: the entry point,
#: the subcommands it loads by name (``cli.SUBCOMMANDS``), and Triton's model, which the
#: model repository's ``model.py`` imports (written by ``triton_repo.py`` as text).
ENTRY_POINTS = {"livecam.cli", "livecam.engines.triton_model"}


def test_every_module_is_used_by_the_product() -> None:
    """Issue 43 item 2: a module only tests or scripts import (the GPU benchmark's naive
    baseline, an unused stage timer) is lab code in the wheel; it moves under tests/ or goes."""
    from livecam.cli import SUBCOMMANDS

    graph = _file_graph()
    used = set().union(*graph.values())
    loaded = ENTRY_POINTS | {f"livecam.subcommands.{name}" for name in SUBCOMMANDS}
    packages = {_module_name(p) for p in ROOT.rglob("__init__.py")}
    unused = sorted(set(graph) - used - loaded - packages)
    assert not unused, f"modules nothing in livecam/ imports: {unused}"
