"""No import circle in the package (docs/development.md: dependencies run one way), read from the source's
syntax trees, so a circle fails here before it fails some import order at run time.

What is an edge: every ``import`` and ``from ... import`` of a module of the package, wherever it is (at module
level, inside a function, under ``if TYPE_CHECKING:``). A type-only import counts: it ties the two modules'
designs as much as any other, and it becomes a run-time one the day a name is needed at run time.

What is not: an import of a package the importing module is inside (``from .. import __version__`` in
``client/transport.py``, ``from . import Store`` in ``ownership/stores/folder.py``). Python imports a package before
any module in it, so that edge never decides which of two modules is imported first, which is what makes a
circle fail; counted, it would make a circle of every package whose ``__init__`` hands out its own modules.
``importlib.import_module`` by name (the package's lazy public surface) is no import statement, and the type
checkers see that surface through its ``TYPE_CHECKING`` imports, which count.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "provider" / "pulumi_together_rl"


def modules(package_dir: Path) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package in ``package_dir``."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(the module of the package each import statement of ``module`` names, its line)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            # `from package import name`: the module `name` when there is one, else the package itself.
            names = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                for alias in node.names
            ]
        for name in names:
            while name and name not in known:  # `import a.b.c` of a module of the package, or a name in one
                name = name.rpartition(".")[0]
            if name:
                yield name, node.lineno


def edges(package_dir: Path) -> dict[str, dict[str, int]]:
    """``{module: {module it imports: line}}`` over the package, by the rules of the module docstring."""
    known = modules(package_dir)
    graph: dict[str, dict[str, int]] = {name: {} for name in known}
    for module, path in known.items():
        for target, line in _imported(module, path, known):
            if target != module and not module.startswith(target + "."):  # its own package: not an edge
                graph[module].setdefault(target, line)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The sets of modules that import each other, directly or through others (the graph's strongly connected
    components of more than one module), by Tarjan's algorithm without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
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
                        found.append(frozenset(component))
    return found


def _described(circle: frozenset[str], graph: dict[str, dict[str, int]]) -> str:
    return "; ".join(
        f"{source} imports {target} (line {line})"
        for source in sorted(circle)
        for target, line in sorted(graph[source].items())
        if target in circle
    )


def test_no_module_of_the_package_is_in_an_import_circle():
    graph = edges(PACKAGE_DIR)
    found = circles(graph)
    assert found == [], "\n".join(_described(c, graph) for c in found)


def test_the_finder_sees_a_circle_through_a_function_or_type_checking_import_and_not_its_own_package(
    tmp_path,
):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "def load():\n    from .sub import c\n",
        "a.py": "def later():\n    from . import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import later\n",
        "sub/__init__.py": "from .c import C\n",
        "sub/c.py": "from .. import load\nfrom . import C\nimport pkg.d\nclass C: ...\n",
        "d.py": "from pkg.sub import c\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)

    graph = edges(package)

    assert graph["pkg.a"] == {"pkg.b": 2} and graph["pkg.b"] == {"pkg.a": 3}
    assert graph["pkg.sub.c"] == {"pkg.d": 3}  # its own packages (pkg.sub, pkg) are not edges
    assert sorted(map(sorted, circles(graph))) == [["pkg.a", "pkg.b"], ["pkg.d", "pkg.sub.c"]]
