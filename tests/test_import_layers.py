"""The package layers import only downward, and no two modules import each other.

Layers, bottom up: ``drafters`` (pure drafting) < ``app.engine`` (the model) < the core of
``app`` (``app.translation``, ``app.rooms``, ``app.speech``, settings, supervision) <
``app.live`` (the live-caption subsystem) < ``app.api`` (routes, with ``app.api.http`` for
middleware) < the composition roots ``app.server`` and ``app.cli``. ``eval`` and
``clients`` are tools on top. The map is docs/architecture.md.
A feature package keeps its HTTP route beside it, as ``route.py`` (WHIP's in
``app.live.whip``, the audience links' in ``app.rooms.audience``): the package sits in the
layer of what it does, its ``route`` module in the API layer, so the package itself never
imports its route; the server mounts it.
An AST read of every module: imports inside functions count too (a lazy import is still a
dependency); imports under ``if TYPE_CHECKING:`` do not.

What the API layer owns (its state, Prometheus metrics, auth, the OpenAI shape of errors)
lives under ``app.api``, so nothing below it can reach it: ``app.live`` gets what it uses in
a services object. An import of a module that no longer exists (an old path after a move)
fails here rather than at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "drafters", "clients", "eval")
ROOTS = {"app.server", "app.cli"}
# pure helpers the engine may use (no model, no server state)
ENGINE_MAY_USE = {"app.translation.pathology", "app.prefix", "app.cores"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            modules[_module_name(path)] = path
    graph = {}
    for name, path in modules.items():
        deps = {imp for imp in _imports(ast.parse(path.read_text(encoding="utf-8")))
                if imp in modules and imp != name}
        graph[name] = deps
    return graph


def _is_feature_route(module: str) -> bool:
    """A feature package's route (``app.live.whip.route``): in the API layer."""
    return module.startswith("app.") and module.rsplit(".", 1)[-1] == "route"


def _layer(module: str) -> int:
    if module.startswith("drafters"):
        return 0
    if module.startswith("app.engine"):
        return 1
    if module in ROOTS:
        return 5
    if module.startswith("app.api") or _is_feature_route(module):
        return 4
    if module.startswith("app.live"):
        return 3
    if module.startswith("app"):
        return 2
    return 6  # eval, clients: tools


def test_layers_import_only_downward() -> None:
    upward = []
    for module, deps in _graph().items():
        for dep in deps:
            if module.startswith("app.engine") and dep in ENGINE_MAY_USE:
                continue
            if _layer(dep) > _layer(module):
                upward.append(f"{module} -> {dep}")
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_nothing_below_the_api_layer_imports_it() -> None:
    below = [f"{module} -> {dep}" for module, deps in _graph().items() for dep in deps
             if _layer(module) < 4 and dep.startswith("app.api")]
    assert not below, "imports of app.api from below it:\n" + "\n".join(sorted(below))


def _module_imports(tree: ast.AST) -> set[str]:
    """The modules named by ``import X`` and ``from X import ...`` (absolute imports)."""
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names} | {
        node.module for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}


def test_imports_of_project_modules_name_modules_that_exist() -> None:
    graph = _graph()
    packages = {name for name in graph if (REPO / name.replace(".", "/")).is_dir()}
    stale = []
    for pkg in (*PACKAGES, "tests"):
        for path in (REPO / pkg).rglob("*.py"):
            for imp in _module_imports(ast.parse(path.read_text(encoding="utf-8"))):
                if imp.split(".")[0] in PACKAGES and imp not in graph and imp not in packages:
                    stale.append(f"{path.relative_to(REPO)}: {imp}")
    assert not stale, "imports of modules that do not exist:\n" + "\n".join(sorted(stale))


def test_no_two_modules_import_each_other() -> None:
    graph = _graph()
    cycles = []
    state: dict[str, int] = {}

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [node, dep])
                              if dep in stack else f"{node} -> {dep}")
            elif dep not in state:
                walk(dep, [*stack, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_clients_do_not_import_the_benchmarks() -> None:
    """``clients`` are what users run against a server; ``eval`` measures the server the
    way users' clients use it, so a benchmark may drive a client (the WHEP listener of
    ``room-voice-bench``, as issue 47 wants one live client for every benchmark), never the
    other way round: what both need otherwise lives below them, in ``app`` (e.g. the
    erasure arithmetic in ``app.prefix``)."""
    upward = [f"{module} -> {dep}" for module, deps in _graph().items() for dep in deps
              if module.split(".")[0] == "clients" and dep.split(".")[0] == "eval"]
    assert not upward, "a client imports a benchmark:\n" + "\n".join(sorted(upward))


# Who in ``app`` may import the llama.cpp engine (``app.engine``): the translation layer,
# which implements the backend seam over it (``app.translation.backend_types``,
# ``app.translation.llama_backend``), and the code that builds or configures the engine
# itself: the composition root (``app.server``), the model loader, the CLI, the commands it
# delegates and its usage text (CPU thread policies), and the vocabulary trimmer (it
# rewrites a model's vocabulary).
ENGINE_USERS = ("app.engine", "app.translation", "app.server", "app.loader", "app.cli",
                "app.commands", "app.usage", "app.vocab_trim")


def _may_use_engine(module: str) -> bool:
    return any(module == user or module.startswith(user + ".") for user in ENGINE_USERS)


def test_above_the_translation_seam_nothing_imports_the_engine() -> None:
    """``app.live``, ``app.api``, ``app.failures`` and the rest name requests, results,
    priorities, errors, timings and health through ``app.translation.backend``, so a second
    backend changes ``app.translation`` and the composition root, nothing above them."""
    leaks = [f"{module} -> {dep}" for module, deps in _graph().items() for dep in deps
             if module.startswith("app") and dep.startswith("app.engine")
             and not _may_use_engine(module)]
    assert not leaks, "imports of app.engine above the seam:\n" + "\n".join(sorted(leaks))
