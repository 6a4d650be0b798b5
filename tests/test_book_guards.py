"""The strict build's two guards on prose: no raw repr in an ``{eval}``, no claim left unguarded.

* ``_ext/buildext.py`` refuses an ``{eval}`` role whose value is not formatted text
  (:func:`buildext.eval_type_problem`, tested directly here) or displays as nothing or
  ``None`` (:func:`buildext.eval_text_problem`), and
* a claim about a computed result stands after a cell that asserts it, so a strict build
  in which it stops being true fails on that cell, naming the claim.

The slow tests build a two-page book with the project's extension and show each guard
failing the build (and a good page passing).
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("buildext", ROOT / "_ext" / "buildext.py")
buildext = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(buildext)


@pytest.mark.parametrize("type_name", ["builtins.dict", "builtins.list", "builtins.tuple",
                                       "builtins.float", "builtins.bool", "numpy.float64",
                                       "numpy.ndarray", "jaxlib._jax.ArrayImpl", "builtins.NoneType"])
def test_raw_values_are_refused_naming_the_expression(type_name):
    problem = buildext.eval_type_problem(type_name, "rec_jax")
    assert problem and "rec_jax" in problem and type_name in problem


@pytest.mark.parametrize("type_name", buildext.EVAL_TYPES)
def test_formatted_text_ints_and_strings_pass(type_name):
    assert buildext.eval_type_problem(type_name, "x") is None


@pytest.mark.parametrize("text", ["", "  ", "None", "none", "'none'", "''", None])
def test_an_empty_or_none_value_is_refused_naming_the_expression(text):
    problem = buildext.eval_text_problem(text, "same_digits")
    assert problem and "same_digits" in problem


@pytest.mark.parametrize("text", ["0", "at no step", "2, 4", "'nonempty'", "None of them"])
def test_a_value_with_text_passes(text):
    assert buildext.eval_text_problem(text, "x") is None


FRONT = textwrap.dedent("""\
    ---
    jupytext:
      text_representation: {extension: .md, format_name: myst, format_version: 0.13}
    kernelspec: {display_name: Python 3, language: python, name: python3}
    ---
    """)
CONFIG = textwrap.dedent("""\
    title: guards
    only_build_toc_files: true
    exclude_patterns: [_build, _ext]
    execute: {execute_notebooks: inline, allow_errors: false, timeout: 120}
    sphinx:
      local_extensions: {buildext: _ext}
      config: {nb_execution_raise_on_error: true}
    """)


def _build(tmp_path, body):
    """Build a one-chapter book whose chapter is ``body`` (strict: -W --keep-going);
    returns (exit status, build output and execution reports)."""
    book = tmp_path / "book"
    (book / "_ext").mkdir(parents=True)
    shutil.copy(ROOT / "_ext" / "buildext.py", book / "_ext" / "buildext.py")
    (book / "src").mkdir()   # buildext hashes src/
    (book / "_config.yml").write_text(CONFIG)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: page\n")
    (book / "intro.md").write_text("# Intro\n")
    (book / "page.md").write_text(FRONT + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(book), "-W", "--keep-going"],
                       capture_output=True, text=True, env=env, timeout=600)
    reports = "".join(p.read_text() for p in (book / "_build").rglob("*.err.log"))
    return r.returncode, r.stdout + r.stderr + reports


GOOD = """
    # Page

    ```{code-cell} ipython3
    from trgad.pages import show
    ratio = 4 / 2
    assert ratio == 2, "each layer doubles the key visits"
    shown = show.num(ratio, ".0f")
    ```

    Each layer doubles the key visits (ratio {eval}`shown`).
    """


@pytest.mark.slow
def test_a_good_page_builds(tmp_path):
    status, out = _build(tmp_path, GOOD)
    assert status == 0, out[-3000:]


@pytest.mark.slow
def test_a_raw_repr_fails_the_build_naming_it(tmp_path):
    status, out = _build(tmp_path, GOOD.replace('shown = show.num(ratio, ".0f")', "shown = {1: (266, 39.06)}"))
    assert status != 0
    assert "raw repr in prose" in out and "shown" in out and "builtins.dict" in out


@pytest.mark.slow
def test_a_claim_made_false_fails_the_build_naming_it(tmp_path):
    status, out = _build(tmp_path, GOOD.replace("ratio = 4 / 2", "ratio = 5 / 2"))
    assert status != 0
    assert "each layer doubles the key visits" in out


@pytest.mark.slow
@pytest.mark.parametrize("value", ['show.text("none")', 'show.text("")', '"None"'])
def test_an_empty_or_none_value_fails_the_build_naming_it(tmp_path, value):
    status, out = _build(tmp_path, GOOD.replace('show.num(ratio, ".0f")', value))
    assert status != 0
    assert "empty value in prose" in out and "{eval}`shown`" in out
