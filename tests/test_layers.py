"""The package's rooms run one way (static, from the source: nothing is imported here).

The rooms are the subpackages of ``src/trgad`` (the top-level modules, the front ends, make
one more), in layers, bottom to top: the runtime <- the JAX core and the book's pages <- the
Part II topics, the keyed engine and the tenferro-rs harness <- the growth probe <- the front
ends.  Every import of a ``trgad`` module counts, function-level ones included: ``from .x
import``, ``from ..room.x import``, ``from . import x``, ``from trgad.room.x import``,
``import trgad.room.x``.  Checked: every module is in a room of one layer; an import between
rooms points down a layer (within a room, any direction); no cycle between modules; no
upper-case module constant is defined in two modules; no ``module._private`` use (or ``from
m import _private``) outside its module, in the package and in the book's code cells.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "trgad"

FRONT = ""                                       # the top-level modules: cli, bench, __main__
LAYERS = [{"runtime"}, {"physics", "pages"}, {"topics", "keyed", "harness"}, {"growth"}, {FRONT}]
PACKAGE_INIT = "__init__"                        # imports the core and the runtime for users
INIT_MAY_USE = {"runtime", "physics"}


def _name(path):
    """``physics.trg`` for src/trgad/physics/trg.py, ``physics`` for its ``__init__``,
    ``cli`` for src/trgad/cli.py and ``__init__`` for the package's own."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_name(p): ast.parse(p.read_text(), filename=str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def _room(name):
    """A module's room: its subpackage, or FRONT for a top-level module."""
    return name.split(".")[0] if "." in name or (PACKAGE / name).is_dir() else FRONT


def _package_of(name):
    """The package a module's relative imports start from (its room, or the top level)."""
    if (PACKAGE / name.replace(".", "/")).is_dir():
        return name
    return name.rsplit(".", 1)[0] if "." in name else ""


def _imported(tree, name="", known=None):
    """(line, module) for every import of a trgad module anywhere in ``tree``, the module
    named by its dotted path under trgad (``physics.trg``); ``name`` is the importing module
    (for relative imports), ``known`` the modules that exist (``from p import x`` names module
    ``p.x`` when it exists, else ``p``)."""
    known = set(_modules()) if known is None else known

    def resolve(base, names):
        out = []
        for a in names:
            full = f"{base}.{a}" if base else a
            out.append(full if full in known else base)
        return out

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(name).split(".") if _package_of(name) else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                base = ".".join(base + (node.module.split(".") if node.module else []))
            elif node.module and node.module.split(".")[0] == "trgad":
                base = ".".join(node.module.split(".")[1:])
            else:
                continue
            found += [(node.lineno, m) for m in resolve(base, [a.name for a in node.names]) if m]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "trgad" and len(parts) > 1:
                    found.append((node.lineno, ".".join(parts[1:])))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            target = _TARGET.fullmatch(node.value)         # "trgad.room.x:f", run in a child
            if target:
                found.append((node.lineno, target.group(1)))
    return found


#: A function named as a string for a child process (``timing.run_with_timeout``).
_TARGET = re.compile(r"trgad\.((?:\w+\.)*\w+):\w+")


def _graph():
    mods = _modules()
    known = set(mods)
    return {name: {m for _, m in _imported(tree, name, known) if m in mods and m != name}
            for name, tree in mods.items()}


def _layer(room):
    return next(i for i, layer in enumerate(LAYERS) if room in layer)


def test_every_module_has_one_room_of_one_layer():
    rooms = {_room(name) for name in _modules() if name != PACKAGE_INIT}
    assert all(sum(room in layer for layer in LAYERS) == 1 for room in rooms), rooms
    assert set().union(*LAYERS) <= rooms | {FRONT}
    assert {"physics.trg", "runtime.validate", "cli", "keyed.engine"} <= set(_modules())


def test_imports_between_rooms_point_down_only():
    mods = _modules()
    bad = []
    for name, tree in mods.items():
        for line, target in _imported(tree, name, set(mods)):
            if target not in mods or target == name:
                continue
            if name == PACKAGE_INIT:
                if _room(target) not in INIT_MAY_USE:
                    bad.append(f"{name}:{line} -> {target}")
            elif _room(target) != _room(name) and _layer(_room(target)) >= _layer(_room(name)):
                bad.append(f"{name}:{line} imports {target} (room {_room(target) or 'front'} not below "
                           f"{_room(name) or 'front'})")
    assert not bad, bad


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


MAX_LINES = 400


def test_no_module_over_the_line_limit():
    long = {p.relative_to(PACKAGE).as_posix(): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


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
    short = {name.split(".")[-1] for name in mods}
    hits = {name: h for name, tree in mods.items() if (h := _private_uses(tree, short))}
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
    known = {"physics", "physics.staged", "physics.modes", "physics.whole", "keyed.engine", "runtime",
             "runtime.validate", "cli"}
    tree = ast.parse("from . import staged\nfrom .modes import _c\nimport trgad.physics.whole\n"
                     "from ..runtime.validate import InputError\nfrom .. import cli\n"
                     "def f():\n    from trgad.keyed.engine import leaf\n    return staged._schedule, staged.x\n")
    assert sorted(m for _, m in _imported(tree, "physics.trg", known)) == \
        ["cli", "keyed.engine", "physics.modes", "physics.staged", "physics.whole", "runtime.validate"]
    top = ast.parse("from .physics import staged\nfrom .runtime.validate import X\nfrom . import bench\n")
    assert sorted(m for _, m in _imported(top, "cli", known | {"bench"})) == \
        ["bench", "physics.staged", "runtime.validate"]
    assert len(_private_uses(tree, {"staged", "modes", "whole", "engine"})) == 2
    page = ("Text naming `trgad.physics.svd._frozen_solves` and `svd.balanced_split`.\n\n"
            "```{code-cell} ipython3\n:tags: [hide-input]\n\nfrom trgad.keyed import engine as keyed\n"
            "print(keyed._graph, keyed.vjp)\nbuildext = load()\nbuildext._VERSIONED\n```\n")
    assert _chapter_private_uses(page) == ["code line 3: keyed._graph", "code line 5: buildext._VERSIONED",
                                           "line 3: keyed._graph", "prose: `trgad.physics.svd._frozen_solves`"]
    assert "X_MAX" in _constants(ast.parse("X_MAX = 1\n_Y = 2\nz = 3\n"))



def _twins(tree):
    """Public functions written as a checked twin of another: the body (its docstring aside)
    one ``return g(...)`` whose arguments call a ``check_*`` - what :func:`checked` replaces."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call):
                call = body[0].value
                checks = [c for a in [*call.args, *(k.value for k in call.keywords)] for c in ast.walk(a)
                          if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id.startswith("check_")]
                if checks and not node.name.startswith("check_"):
                    found.append(node.name)
    return found


def test_input_is_checked_by_one_mechanism():
    """Input is checked once, at the boundary, by one mechanism: a public function is written
    once and marked ``@checked`` (:func:`trgad.runtime.validate.checked`); trgad's own callers
    call ``f.trusted``.  No ``*_unchecked`` twin is left in the package or the book, and no
    public function is a twin under another name (checks, then hands everything to another)."""
    named = [f"{p.relative_to(ROOT)}: {m}" for p in [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "book").glob("*.md"))]
             for m in re.findall(r"\b\w+_unchecked\b", p.read_text())]
    assert not named, named
    twins = {name: _twins(tree) for name, tree in _modules().items()}
    assert not {m: t for m, t in twins.items() if t}, twins
    twin = ast.parse("def f(beta, schedule):\n    \"\"\"Doc.\"\"\"\n    return g(check_beta(beta), list(check_schedule(schedule)))\n"
                     "def check_x(x):\n    return check_int('x', x, 1)\n"
                     "@checked(beta=check_beta)\ndef h(beta):\n    return g(beta)\n")
    assert _twins(twin) == ["f"]
