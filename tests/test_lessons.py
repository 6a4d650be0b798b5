"""Part I's pages keep the shape of a lesson (the developers' guide: a lesson cell, then its
claims), checked on the MyST sources with :mod:`trgad.pages.lessons`:

* every code cell a reader sees is short and narrow: at most :data:`MAX_LINES` non-blank
  lines of at most :data:`MAX_CHARS` characters (longer lines scroll sideways in the HTML);
  the width holds on every page of the book (:data:`ALL_PAGES`), Part II and the appendices
  too, the number of lines on Part I's only;
* every ``{eval}`name``` in a paragraph names a variable bound at the top level of an
  earlier code cell, and the nearest code cell above the paragraph is a claims cell or one
  that binds it (the value is prepared where the reader meets the sentence);
* every cell hidden in the HTML (``remove-input``) is hidden in JupyterLab too
  (``jupyter: {source_hidden: true}``), and the other way round, on every page;
* a cell the reader can open (shown, or folded behind a toggle) reads no name that only a
  hidden claims cell binds, on every page: its code runs as the reader sees it;
* a claims cell that is not a figure prints nothing, on every page: its output would show
  in the HTML without the code that made it (read from the source: no call that prints or
  displays, and no bare expression last, whose value IPython would display).
"""
import ast
import re
from pathlib import Path

import pytest
import yaml

from trgad.pages import lessons

BOOK = Path(__file__).resolve().parents[1] / "book"
#: Non-blank lines of a code cell a reader sees, at most.
MAX_LINES = 16
#: Characters of one of its lines, at most.
MAX_CHARS = 90

#: Part I and its introduction: the pages whose cells follow the lesson-and-claims pattern.
PAGES = ["intro", "tenminutes", "tenminutes-zh", "phenomenon", "mulchain", "rootcause", "staged",
         "detect"]
#: Every page in book/: the width of the cells a reader sees holds on all of them.
ALL_PAGES = sorted(p.stem for p in BOOK.glob("*.md"))

_EVAL = re.compile(r"\{eval\}`([^`]+)`")


def _cells(page):
    return lessons.cells(BOOK / f"{page}.md")


def bound_names(source):
    """Names a cell binds at its top level (assignments, imports, defs, loop and with
    targets, also inside top-level if/for/while/with/try), not inside functions, classes,
    lambdas or comprehensions."""
    names = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return names


def paragraphs(markdown):
    return [p for p in re.split(r"\n\s*\n", markdown) if p.strip()]


@pytest.mark.parametrize("page", PAGES)
def test_shown_cells_are_short_and_narrow(page):
    bad = []
    for cell in _cells(page):
        if not cell.shown:
            continue
        lines = [s for s in cell.source.splitlines() if s.strip()]
        wide = [s for s in lines if len(s) > MAX_CHARS]
        if len(lines) > MAX_LINES or wide:
            bad.append(f"line {cell.line}: {len(lines)} lines, {len(wide)} wider than {MAX_CHARS}")
    assert not bad, f"{page}.md: " + "; ".join(bad)


@pytest.mark.parametrize("page", ALL_PAGES)
def test_shown_cells_are_narrow_on_every_page(page):
    """No line of a cell the reader sees scrolls sideways in the HTML, on any page (Part II's
    cells may be longer than :data:`MAX_LINES`; hidden claims cells may be wider)."""
    bad = []
    for cell in _cells(page):
        if not cell.shown:
            continue
        wide = [len(s) for s in cell.source.splitlines() if len(s) > MAX_CHARS]
        if wide:
            bad.append(f"cell at line {cell.line}: {len(wide)} lines wider than {MAX_CHARS} "
                       f"(up to {max(wide)})")
    assert not bad, f"{page}.md: " + "; ".join(bad)


def test_every_page_of_the_toc_is_checked_for_width():
    toc = yaml.safe_load((BOOK.parent / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    missing = [f for f in files if Path(f).name not in ALL_PAGES]
    assert not missing, f"pages of _toc.yml not in book/: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_inline_values_are_prepared_just_above(page):
    bound, nearest, bad = set(), None, []
    for cell in _cells(page):
        if cell.kind == "code":
            nearest = (cell, bound_names(cell.source))
            bound |= nearest[1]
            continue
        for para in paragraphs(cell.source):
            for name in _EVAL.findall(para):
                if name not in bound:
                    bad.append(f"{name} (line {cell.line}): not bound in an earlier cell")
                elif not (nearest[0].claims or name in nearest[1]):
                    bad.append(f"{name} (line {cell.line}): the nearest cell above is neither "
                               f"a claims cell nor binds it")
    assert not bad, f"{page}.md: " + "; ".join(bad)


@pytest.mark.parametrize("page", ALL_PAGES)
def test_claims_cells_are_hidden_in_html_and_jupyterlab(page):
    bad = [f"line {c.line}: tags {sorted(c.tags)}, source_hidden {c.source_hidden}"
           for c in _cells(page) if c.kind == "code"
           and ("remove-input" in c.tags) != c.source_hidden]
    assert not bad, f"{page}.md: " + "; ".join(bad)


#: Calls whose effect is something shown below the cell.
SHOWING_CALLS = {"print", "display", "show.table", "show.grid", "plt.show", "plt.figure",
                 "plt.subplots"}


def shows_output(source):
    """What in a cell's ``source`` prints or displays something, read statically: calls of
    :data:`SHOWING_CALLS` anywhere in it, and a bare expression as its last top-level
    statement (IPython displays its value) unless the line ends with ``;``."""
    tree = ast.parse(source)
    found = [ast.unparse(n.func) for n in ast.walk(tree)
             if isinstance(n, ast.Call) and ast.unparse(n.func) in SHOWING_CALLS]
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and not source.rstrip().endswith(";"):
        found.append(f"last expression {ast.unparse(last)[:40]}")
    return found


def _is_figure(page, cell):
    """Whether the code cell's metadata block holds ``figure:`` (``mystnb: figure:``)."""
    lines = (BOOK / f"{page}.md").read_text(encoding="utf-8").splitlines()
    i = cell.line                                          # the line after the fence
    if i >= len(lines) or lines[i].strip() != "---":
        return False
    end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "---")
    return any(line.strip() == "figure:" for line in lines[i + 1:end])


@pytest.mark.parametrize("page", ALL_PAGES)
def test_claims_cells_print_nothing(page):
    """A claims cell's output would show in the HTML without its code: only a figure may."""
    bad = [f"line {c.line}: {', '.join(found)}" for c in _cells(page)
           if c.claims and not _is_figure(page, c) and (found := shows_output(c.source))]
    assert not bad, f"{page}.md: claims cells that show something: " + "; ".join(bad)


def test_shows_output_reads_prints_and_last_expressions():
    assert shows_output("x = 1\nprint(x)\ny = x") == ["print"]
    assert shows_output("x = 1\nx") == ["last expression x"]
    assert shows_output("x = 1\nx;") == []
    assert shows_output("def f():\n    show.table([], {})\nassert x") == ["show.table"]
    assert shows_output("assert x == 1, 'guard'\nx_s = show.num(x)") == []


PAGE = """\
---
kernelspec: {name: python3}
---

# Title

Some *prose* with [a link](other.md) and a value {eval}`x`.

```{code-cell} ipython3
x = 1
```

```{code-cell} ipython3
---
tags: [remove-input]
jupyter:
  source_hidden: true
---
assert x == 1
```

```{exercise} Two words
:label: ex-one
```
"""


def test_cells_reads_code_markdown_and_metadata():
    got = lessons.cells(PAGE)
    assert [c.kind for c in got] == ["markdown", "code", "code", "markdown"]
    assert got[1].source == "x = 1" and got[1].shown and not got[1].claims
    assert got[2].claims and not got[2].shown and got[2].tags == {"remove-input"}
    assert got[1].line == 9 and got[2].line == 13


def test_reading_time_counts_prose_and_shown_cells(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(PAGE)
    got = lessons.reading_time([page, page], words_per_minute=10, minutes_per_cell=2)
    # "Title" + "Some prose with a link and a value {eval}`x`." (9) + "Two words" (2)
    assert got == {"words": 2 * 12, "han": 0, "cells": 2, "minutes": 2 * 12 / 10 + 2 * 2}


def test_bound_names_are_top_level_only():
    src = ("import numpy as np\nfrom a import b\nx, (y, *z) = 1, (2, 3)\nfor i in []: pass\n"
           "def f(q):\n    w = q\n[k for k in ()]\nif True:\n    v = 1\n")
    assert bound_names(src) == {"np", "b", "x", "y", "z", "i", "f", "v"}


def test_page_path_finds_the_book_from_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert lessons.page_path("phenomenon.md") == BOOK / "phenomenon.md"
    with pytest.raises(FileNotFoundError, match="no-such-page.md"):
        lessons.page_path("no-such-page.md")


def _local_names(source):
    """Every name a cell binds anywhere: stores, function and lambda arguments, defs,
    imports (a name it binds itself is not one it takes from an earlier cell)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("page", ALL_PAGES)
def test_cells_a_reader_can_open_use_no_name_only_a_claims_cell_binds(page):
    """A shown or folded (hide-input) cell's code is there to be read and run: every name it
    reads from earlier cells is bound by an earlier cell the reader can see too, never only by
    a hidden claims cell (whose code the reader does not get)."""
    shown_bound, claims_bound, bad = set(), set(), []
    for c in _cells(page):
        if c.kind != "code":
            continue
        if c.claims:
            claims_bound |= bound_names(c.source)
            continue
        read = {n.id for n in ast.walk(ast.parse(c.source))
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        hidden = (read - _local_names(c.source) - shown_bound) & claims_bound
        bad += [f"{name} (line {c.line})" for name in sorted(hidden)]
        shown_bound |= bound_names(c.source)
    assert not bad, f"{page}.md: names only a claims cell binds: " + "; ".join(bad)
