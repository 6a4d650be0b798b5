"""Each chapter runs in Jupyter, the way a reader who opens it there would run it.

For every page in _toc.yml: jupytext reads the MyST Markdown file as a notebook (what
Jupyter does with jupytext installed), and nbclient runs it top to bottom in a fresh
``python3`` kernel whose working directory is a fresh, empty temporary folder, so a page
that depends on a file next to it, on the build's working directory, or on state left by
another page fails here.  Any cell that raises fails the test.

The prose's numbers: at each Markdown cell, the ``{eval}`name`` roles it holds are sent to
the kernel as ``user_expressions`` of an empty execute request, exactly as jupyterlab-myst
does when a reader runs that cell in JupyterLab (checks/test_jupyterlab.py watches one
chapter in a real JupyterLab).  Each must evaluate, at that point of the page, to a
``text/plain`` display that is neither a raw NumPy/JAX repr nor a quoted string.

Figures: a cell with ``mystnb: figure:`` metadata (the built page shows its output as a
numbered, captioned figure) must display exactly one output, an image: a Jupyter reader
sees that image, and myst-nb would wrap any further output in a figure of its own.

Speed: the kernel gets ``TRGAD_PREVIEW=1`` unless ``TRGAD_PREVIEW`` is already set in the
environment (``TRGAD_PREVIEW=0 pytest checks/test_notebooks.py`` runs the full story).
The preview caps come from ``trgad.pages.caps``, the one place for caps.  The built book (the
strict build) always runs the full story; this check is about *running in Jupyter*, so
the smaller caps keep CI quick without changing what is tested.
"""
from __future__ import annotations

import os
import re
import tempfile
import time

import pytest

from bookpaths import chapter_source, toc_docnames

CELL_TIMEOUT = 900  # seconds, as execute.timeout in _config.yml
DOCS = toc_docnames()
ROLE = re.compile(r"\{eval\}`([^`]+)`")
RAW_REPR = re.compile(r"np\.(float|int)\d*\(|Array\(|dtype=|<function |object at 0x|^['\"]")


def _kernel_env():
    env = dict(os.environ)
    env.setdefault("TRGAD_PREVIEW", "1")
    env.pop("MPLBACKEND", None)  # the reader's default inline backend
    return env


def _user_expressions(client, names):
    """Evaluate ``names`` in the kernel as jupyterlab-myst does: {name: reply content}."""
    msg_id = client.kc.execute("", silent=False, store_history=False,
                               user_expressions={n: n for n in names})
    reply = client.wait_for_reply(msg_id)
    return reply["content"]["user_expressions"]


def _expression_problems(results):
    problems = []
    for name, res in results.items():
        if res.get("status") != "ok":
            problems.append(f"{{eval}}`{name}` failed: {res.get('ename')}: {res.get('evalue')}")
            continue
        plain = res.get("data", {}).get("text/plain", "")
        if not plain.strip():
            problems.append(f"{{eval}}`{name}` has no text/plain display")
        elif RAW_REPR.search(plain):
            problems.append(f"{{eval}}`{name}` shows a raw repr {plain[:60]!r} (use trgad.pages.show.num/text)")
    return problems


def _figure_problems(nb):
    problems = []
    for cell in nb.cells:
        fig = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if cell.cell_type != "code" or not fig:
            continue
        shown = [o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")]
        name = fig.get("name", "?")
        if len(shown) != 1 or "image/png" not in shown[0].get("data", {}):
            kinds = [sorted(o.get("data", {})) for o in shown]
            problems.append(f"figure cell {name!r} must display exactly one image, displays {kinds} "
                            f"(end the cell with a statement, not an expression)")
    return problems


@pytest.mark.parametrize("docname", DOCS)
def test_chapter_runs_in_fresh_kernel(docname):
    jupytext = pytest.importorskip("jupytext")
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = chapter_source(docname)
    if path.suffix == ".md" and "{code-cell}" not in path.read_text():
        pytest.skip(f"{path.name} is a text page (no code cells): nothing to run in Jupyter")
    nb = jupytext.read(path)
    kernelspec = nb.metadata.get("kernelspec", {})
    assert kernelspec.get("name") == "python3", (
        f"{path.name}: no `kernelspec: {{name: python3}}` in the front matter, so Jupyter "
        f"would not open it as a runnable notebook")
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells, f"{path.name}: jupytext found no code cells (is the front matter right?)"

    problems, n_expr = [], 0
    with tempfile.TemporaryDirectory(prefix="trgad-nb-") as cwd:
        client = NotebookClient(
            nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=False,
            resources={"metadata": {"path": cwd}},
        )
        t0 = time.perf_counter()
        client.reset_execution_trackers()
        with client.setup_kernel(cwd=cwd, env=_kernel_env()):
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    try:
                        client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
                    except CellExecutionError as err:
                        pytest.fail(f"{path.relative_to(path.parents[1])} failed in a fresh kernel "
                                    f"(cwd {cwd}):\n{err}", pytrace=False)
                elif cell.cell_type == "markdown":
                    names = sorted(set(ROLE.findall(cell.source)))
                    if names:
                        n_expr += len(names)
                        problems += _expression_problems(_user_expressions(client, names))
        seconds = time.perf_counter() - t0
        leftovers = sorted(os.listdir(cwd))
    problems += _figure_problems(nb)
    assert not problems, f"{path.name} in Jupyter:\n  " + "\n  ".join(problems)
    print(f"{docname}: ran {len(code_cells)} code cells and {n_expr} inline expressions in {seconds:.1f} s"
          + (f"; wrote {leftovers} into its working directory" if leftovers else ""))
