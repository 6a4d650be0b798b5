"""Shared helpers for the reader-facing checks (``pytest checks``).

These checks look at the book the way a reader meets it: the built HTML in a real browser
(test_browser.py), each chapter run in a fresh Jupyter kernel (test_notebooks.py), and one
chapter opened and run in a real JupyterLab (test_jupyterlab.py).  They are not unit tests
(those live in tests/ and run with plain ``pytest``).

Environment:

* ``CI=true``: a missing build, browser or package is a failure, not a skip.
* ``TRGAD_BUILD_DIR``: the ``_build`` folder to check (default: ``<repo>/_build``), e.g. the
  one made by ``jupyter-book build . --path-output /tmp/out`` is ``/tmp/out/_build``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str):
    """Skip locally; fail in CI, where a missing prerequisite is a broken pipeline."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


def build_dir() -> Path:
    return Path(os.environ.get("TRGAD_BUILD_DIR", ROOT / "_build")).resolve()


def toc_docnames() -> list[str]:
    """Docnames in reading order: the root, then every file listed in _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts", []) or []:
                walk(part.get("chapters"))
            walk(entry.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []) or []:
        walk(part.get("chapters"))
    return [str(Path(n).with_suffix("")) if Path(n).suffix in (".md", ".ipynb") else n
            for n in names]


def chapter_source(docname: str) -> Path:
    for suffix in (".md", ".ipynb"):
        path = ROOT / (docname + suffix)
        if path.exists():
            return path
    raise FileNotFoundError(f"{docname}: no .md or .ipynb source next to _toc.yml")
