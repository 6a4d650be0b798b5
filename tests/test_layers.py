"""The package's rooms run one way (static, from the source: nothing is imported here).

Layers, bottom to top: support <- JAX core <- engine side <- front ends.  Every import of a
``trgad`` module in ``src/trgad`` counts, function-level ones included: ``from .x import``,
``from . import x``, ``from trgad.x import``, ``import trgad.x``.  Checked: no cycle; the
JAX core and support reach nothing on the engine side or the front ends; support reaches
nothing above it; each module is in exactly one layer; no upper-case module constant is
defined in two modules; no ``module._private`` use (or ``from m import _private``) outside
its module, in the package and in the book's code cells.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "trgad"

SUPPORT = {"validate", "caps", "timing", "show", "recorded", "verdict", "userstep", "compiled", "cache",
           "report", "flowchart", "lessons"}
CORE = {"ising", "trg", "svd", "whole", "staged", "modes", "exact", "params", "transition",
        "fixedpoint", "elsewhere", "broadened", "impurity"}
ENGINE = {"keys", "keylayout", "rules", "program", "engine", "keyed_trg", "chain", "probe", "tenferro",
          "callgrind"}
FRONT = {"cli", "bench", "__main__"}
LAYERS = [SUPPORT, CORE, ENGINE, FRONT]          # each may use itself and those before it
PACKAGE_INIT = "__init__"                        # imports the core and support for users


def _modules():
    return {p.stem: ast.parse(p.read_text(), filename=str(p)) for p in sorted(PACKAGE.glob("*.py"))}


def _imported(tree):
    """(line, module) for every import of a trgad module anywhere in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:                                  # from .x import / from . import x
                if node.module:
                    found.append((node.lineno, node.module.split(".")[0]))
                else:
                    found += [(node.lineno, a.name) for a in node.names]
            elif node.level == 0 and node.module and node.module.split(".")[0] == "trgad":
                parts = node.module.split(".")
                if len(parts) > 1:
                    found.append((node.lineno, parts[1]))
                else:                                            # from trgad import x
                    found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "trgad" and len(parts) > 1:
                    found.append((node.lineno, parts[1]))
    return found


def _graph():
    mods = _modules()
    return {name: {m for _, m in _imported(tree) if m in mods and m != name} for name, tree in mods.items()}


def _layer(name):
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    return None


def test_every_module_has_one_layer():
    names = set(_modules()) - {PACKAGE_INIT}
    assert all(sum(name in layer for layer in LAYERS) == 1 for name in names), \
        sorted(n for n in names if sum(n in layer for layer in LAYERS) != 1)
    assert set().union(*LAYERS) - {"__main__"} <= names | {"__main__"}


def test_imports_point_down_or_sideways_only():
    mods = _modules()
    bad = []
    for name, tree in mods.items():
        for line, target in _imported(tree):
            if target not in mods or target == name:
                continue
            if name == PACKAGE_INIT:
                if _layer(target) not in (0, 1):
                    bad.append(f"{name}:{line} -> {target}")
            elif _layer(target) > _layer(name):
                bad.append(f"{name}.py:{line} imports {target} (layer {_layer(target)} above {_layer(name)})")
    assert not bad, bad


def test_support_and_core_never_reach_the_engine_or_front_ends():
    graph = _graph()
    reach = {}

    def reachable(name, seen=None):
        seen = set() if seen is None else seen
        for m in graph[name]:
            if m not in seen:
                seen.add(m)
                reachable(m, seen)
        return seen

    for name in SUPPORT | CORE:
        reach[name] = reachable(name)
        assert not reach[name] & (ENGINE | FRONT), (name, sorted(reach[name] & (ENGINE | FRONT)))
    for name in SUPPORT:
        assert reach[name] <= SUPPORT, (name, sorted(reach[name] - SUPPORT))


def test_no_import_cycle():
    graph = _graph()
    state, cycles = {}, []

    def visit(name, path):
        state[name] = "open"
        for m in sorted(graph[name]):
            if state.get(m) == "open":
                cycles.append(path[path.index(m):] + [m] if m in path else [name, m])
            elif m not in state:
                visit(m, path + [m])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


def _constants(tree):
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and n.id.lstrip("_").isupper():
                    names.add(n.id)
    return names


def test_no_upper_case_constant_defined_in_two_modules():
    where = {}
    for name, tree in _modules().items():
        for const in _constants(tree):
            where.setdefault(const, []).append(name)
    twice = {c: ms for c, ms in where.items() if len(ms) > 1}
    assert not twice, twice


def _private_uses(tree, module_names, own=None):
    """``x._y`` where ``x`` is bound to a module by an import in ``tree`` (trgad modules, or
    any module when ``module_names`` is None), and ``from m import _y``; dunders excepted."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound[(a.asname or a.name).split(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            for a in node.names:
                bound[a.asname or a.name] = f"{base}.{a.name}" if node.module else a.name
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("trgad")):
            hits += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                     if a.name.startswith("_") and not a.name.startswith("__")]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                target = bound[base.id]
                if module_names is None or target.split(".")[-1] in module_names or target.startswith("trgad"):
                    hits.append(f"line {node.lineno}: {ast.unparse(node)}")
    return hits


def test_no_private_name_used_outside_its_module():
    mods = _modules()
    hits = {name: h for name, tree in mods.items() if (h := _private_uses(tree, set(mods)))}
    assert not hits, hits


FENCE = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


def _code_cells(text):
    """The Python source of each code cell of a MyST notebook (its options and magics dropped)."""
    cells = []
    for body in FENCE.findall(text):
        lines = body.splitlines()
        if lines and lines[0].strip() == "---":                     # a YAML options block
            end = lines.index("---", 1)
            lines = lines[end + 1:]
        lines = [ln for ln in lines if not re.match(r"\s*(:\w+:|[%!])", ln)]
        cells.append("\n".join(lines))
    return cells


PROSE_PRIVATE = re.compile(r"`(?:[A-Za-z]\w*\.)+_[A-Za-z]\w*")      # `module._name` in the text


def _chapter_private_uses(text):
    """A chapter's private names: in its code cells any ``x._y`` but on ``self``/``cls`` (a
    module loaded with importlib is bound by assignment, not import), ``from m import _y``;
    in its prose any ```module._name``` reference."""
    tree = ast.parse("\n\n".join(_code_cells(text)))   # names bound in one cell serve the next
    hits = _private_uses(tree, {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            hits.append(f"code line {node.lineno}: {ast.unparse(node)}")
    prose = FENCE.sub("", text)
    hits += [f"prose: {m}`" for m in PROSE_PRIVATE.findall(prose)]
    return sorted(set(hits))


@pytest.mark.parametrize("chapter", sorted(p.name for p in (ROOT / "book").glob("*.md")))
def test_no_private_name_in_a_chapter(chapter):
    hits = _chapter_private_uses((ROOT / "book" / chapter).read_text())
    assert not hits, hits


def test_the_checks_see_what_they_look_for():
    # the walkers find what they are written to find (a check that cannot fail checks nothing)
    tree = ast.parse("from . import staged\nfrom .modes import _c\nimport trgad.whole\n"
                     "def f():\n    from trgad.engine import leaf\n    return staged._schedule, staged.x\n")
    assert sorted(m for _, m in _imported(tree)) == ["engine", "modes", "staged", "whole"]
    assert len(_private_uses(tree, {"staged", "modes", "whole", "engine"})) == 2
    page = ("Text naming `trgad.svd._frozen_solves` and `svd.balanced_split`.\n\n"
            "```{code-cell} ipython3\n:tags: [hide-input]\n\nfrom trgad import engine as keyed\n"
            "print(keyed._graph, keyed.vjp)\nbuildext = load()\nbuildext._VERSIONED\n```\n")
    assert _chapter_private_uses(page) == ["code line 3: keyed._graph", "code line 5: buildext._VERSIONED",
                                           "line 3: keyed._graph", "prose: `trgad.svd._frozen_solves`"]
    assert "X_MAX" in _constants(ast.parse("X_MAX = 1\n_Y = 2\nz = 3\n"))

