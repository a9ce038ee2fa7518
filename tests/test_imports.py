"""No import cycle in src/henn: neither between modules nor between packages (henn.<name>), counting
imports inside functions too. Data flows one way: frontend -> IR -> passes -> Program -> runtime ->
backend, with the packing layer below passes and lowering.

A backend (henn.ckks.backends.<name>) is a plugin of its own: the registry finds it by name and the CKKS
core (interface, parameters, values) never imports one. A backend builds on the core, and one whose
library lacks a circuit may build it from henn's kernels (the gpu backend's bootstrapping, as Lattigo's
circuits sit above its scheme)."""

import ast
from pathlib import Path

import henn

ROOT = Path(henn.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name and t != "henn"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def _unit(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:4] if parts[:3] == ["henn", "ckks", "backends"] and len(parts) > 3 else parts[:2])


def _packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    unit = _unit
    out: dict[str, set[str]] = {}
    for src, targets in graph.items():
        out.setdefault(unit(src), set()).update(unit(t) for t in targets if unit(t) != unit(src))
    return out


def test_no_module_imports_itself_back():
    assert _cycle(_imports()) is None


def test_no_package_imports_itself_back():
    assert _cycle(_packages(_imports())) is None


def test_the_layers_point_down():
    packages = _packages(_imports())
    assert "henn.compiler" not in packages["henn.runtime"] and "henn.passes" not in packages["henn.packing"]
    assert not packages["henn.ckks"] & {"henn.compiler", "henn.passes", "henn.runtime", "henn.packing"}
    backends = {p for p in packages if p.startswith("henn.ckks.backends.")}
    assert backends and not packages["henn.ckks"] & backends
    for backend in backends:
        assert not packages[backend] & {"henn.compiler", "henn.passes", "henn.runtime", "henn.deploy"}, backend


def test_the_checker_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
