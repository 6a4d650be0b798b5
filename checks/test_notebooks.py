"""Each chapter runs in Jupyter, the way a reader who opens it there would run it.

For every page in _toc.yml: jupytext reads the MyST Markdown file as a notebook (what
Jupyter does with jupytext installed), and nbclient runs it top to bottom in a fresh
``python3`` kernel whose working directory is a fresh, empty temporary folder, so a page
that depends on a file next to it, on the build's working directory, or on state left by
another page fails here.  Any cell that raises fails the test, and so does a figure that
the built page shows (``{glue:figure}``) but a Jupyter reader would not see as an image.

Speed: the kernel gets ``TRGAD_PREVIEW=1`` unless ``TRGAD_PREVIEW`` is already set in the
environment (``TRGAD_PREVIEW=0 pytest checks/test_notebooks.py`` runs the full story).
The preview caps come from ``trgad.caps``, the one place for caps.  The built book (the
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


def _kernel_env():
    env = dict(os.environ)
    env.setdefault("TRGAD_PREVIEW", "1")
    env.pop("MPLBACKEND", None)  # the reader's default inline backend
    return env


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

    with tempfile.TemporaryDirectory(prefix="trgad-nb-") as cwd:
        client = NotebookClient(
            nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=False,
            resources={"metadata": {"path": cwd}},
        )
        t0 = time.perf_counter()
        try:
            client.execute(cwd=cwd, env=_kernel_env())
        except CellExecutionError as err:
            pytest.fail(f"{path.relative_to(path.parents[1])} failed in a fresh kernel "
                        f"(cwd {cwd}):\n{err}", pytrace=False)
        seconds = time.perf_counter() - t0
        leftovers = sorted(os.listdir(cwd))
    figures = re.findall(r"^```\{glue:figure\}\s+(\S+)", path.read_text(), flags=re.M)
    shown = {out.get("metadata", {}).get("scrapbook", {}).get("name")
             for c in nb.cells if c.cell_type == "code" for out in c.get("outputs", [])
             if "image/png" in out.get("data", {})}
    hidden = [name for name in figures if name not in shown]
    assert not hidden, (f"{path.name}: figures {hidden} are glued with display=False, so a "
                        f"Jupyter reader never sees them; glue them with display=True in a "
                        f"remove-cell cell")
    print(f"{docname}: ran {len(code_cells)} code cells in {seconds:.1f} s"
          + (f"; wrote {leftovers} into its working directory" if leftovers else ""))
