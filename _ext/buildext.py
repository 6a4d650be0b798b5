"""Sphinx extension for this book's build (``_config.yml``: ``sphinx.local_extensions``).

The pages are executed inline (``execute_notebooks: inline``): myst-nb runs each page in a
fresh kernel while it parses it, so the ``{eval}`` roles in the prose read the kernel's
variables.  Inline execution has no cache: a page that Sphinx reads is executed in full.
This extension does six things around that:

1. **Re-reads, hence re-executes, every page when what the pages compute with changes.**
   Sphinx alone re-reads only pages whose source changed, so after an edit under ``src/``
   the other pages would keep stale numbers.  The config value ``trgad_inputs_key`` (one
   that makes Sphinx re-read every page when it changes) is set to a hash of every file
   under ``src/``, the caps in force (``trgad.pages.caps.PREVIEW``) and the versions of Python,
   JAX, jaxlib, NumPy, SciPy, myst-nb and nbclient.
2. **Collects every failing page in a strict build.**  With ``-W --keep-going`` it sets
   ``nb_execution_raise_on_error = False``, so a failing cell is a warning (which fails the
   build at the end) instead of aborting at the first failing page; myst-nb then writes
   the traceback to ``_build/html/reports/``.  Without ``--keep-going`` the book's
   ``nb_execution_raise_on_error: true`` stops the build at the first failing cell.
3. **Keeps the browser console clean**: drops script tags that appear twice on a page
   (sphinx-thebe 0.3 with Sphinx 7 adds its config script twice, raising "Identifier
   'THEBE_JS_URL' has already been declared").
4. **Fails the build on a raw repr in the prose.**  An ``{eval}`name``` shows its value's
   display; for a dict, list, tuple, float, NumPy scalar or array that is Python's repr
   (``{1: (266, 39.06)}``, ``np.float64(0.79...)``, every digit of a float), never what a
   sentence means.  Each role's value must be a ``trgad.pages.show.Text`` (``show.num``,
   ``show.text``), a Python ``int`` or a ``str``; anything else is a warning naming the page,
   the line and the expression (:data:`EVAL_TYPES`, :func:`eval_type_problem`), which a
   strict build (``-W``) turns into an error.  So is a value whose text is empty or
   ``None``/``none`` (:func:`eval_text_problem`): "at none steps" is a sentence that lost its
   value; the cell should say the case in words of its own.
5. **Reads the pages side by side, one CPU each**: Sphinx's parallel read (what
   ``sphinx-build -j`` sets; ``jupyter-book build`` has no such option) with one process
   per usable CPU, each pinned to a CPU of its own (``trgad.runtime.compiled.pin_to_one_cpu``,
   which the page kernels it starts inherit), so each page's kernel has one core while
   other pages run on the others.  Unpinned, kernels whose XLA thread pools share the
   cores can slow each other down by a large factor.  ``TRGAD_BUILD_JOBS=N`` sets the
   number of processes (1: one page after another, unpinned); Sphinx itself reads serially,
   in its main process and unpinned, when five pages or fewer need reading (a small
   rebuild), and with more than one process it also writes the HTML in parallel.  Sphinx
   reads in parallel only when every extension declares itself safe for it; three that
   Jupyter Book loads declare nothing and are safe (:data:`UNDECLARED_BUT_SAFE` says why),
   so they are marked.
6. **Writes each page's execution time** (myst-nb's record: from starting the page's kernel
   to closing it, i.e. executing and rendering the page) and the wall time of the whole
   Sphinx build to ``_build/execution-times.json`` and ``_build/execution-times.txt``,
   labelled with the caps in force (``trgad.pages.caps.PREVIEW``), so that a preview build's
   times are not mistaken for the full book's.  ``python _ext/build_times.py`` prints them.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path

#: Distributions whose versions key the build (a change re-executes every page).
VERSIONED = ("jax", "jaxlib", "numpy", "scipy", "myst-nb", "nbclient")

#: The types an ``{eval}`` role may show: formatted text, and integers and strings, whose
#: displays are their text.  (``bool`` is a subclass of ``int``, but its type name differs.)
EVAL_TYPES = ("trgad.pages.show.Text", "builtins.int", "builtins.str")


def eval_type_problem(type_name: str, expression: str) -> str | None:
    """Why the value of ``{eval}`expression``` (of type ``type_name``, "module.qualname") must
    not go into prose, or None when it may: only :data:`EVAL_TYPES` display as formatted
    text."""
    if type_name in EVAL_TYPES:
        return None
    return (f"raw repr in prose: {{eval}}`{expression}` is a {type_name}, which displays as its "
            f"repr; format it in its cell with trgad.pages.show.num(x, fmt) or trgad.pages.show.text(...)")


def eval_text_problem(text: str | None, expression: str) -> str | None:
    """Why ``{eval}`expression```, displayed as ``text`` (its ``text/plain``; a str's quotes
    are dropped), must not go into prose, or None when it may: an empty text, or ``None`` in
    any case, is a value the sentence lost."""
    shown = (text or "").strip().strip("'\"").strip()
    if shown and shown.lower() != "none":
        return None
    return (f"empty value in prose: {{eval}}`{expression}` displays as {text!r}; give the "
            f"sentence's case its own words in the cell (e.g. 'at no step')")


def _guard_eval_roles():
    """Wrap myst-nb's evaluation of ``{eval}`` roles so that each value's type and text are
    checked (item 4 of the module docstring).  The type is asked of the page's kernel through the
    inline executor's client (myst-nb 1.x internals: ``nb_client._client.eval_expression``);
    if that is missing, every role fails loudly instead of passing unchecked."""
    from myst_nb.core.variables import RetrievalError
    from myst_nb.ext import eval as nb_eval

    original = nb_eval.retrieve_eval_data
    if getattr(original, "_trgad_guarded", False):
        return

    def retrieve_eval_data(document, key):
        data = original(document, key)
        client = getattr(getattr(document["nb_renderer"].renderer, "nb_client", None), "_client", None)
        if client is None or not hasattr(client, "eval_expression"):
            raise RetrievalError("cannot check the type of an {eval} value with this myst-nb "
                                 "(_ext/buildext.py needs nb_client._client.eval_expression)")
        probe = f"(lambda v: type(v).__module__ + '.' + type(v).__qualname__)({key})"
        outputs = client.eval_expression(probe)
        text = next((o.get("data", {}).get("text/plain") for o in outputs
                     if o.get("output_type") == "execute_result"), None)
        problem = eval_type_problem((text or "?").strip("'\""), key)
        if problem is None:
            shown = next((o.data.get("text/plain") for o in data if "text/plain" in o.data), None)
            problem = eval_text_problem(shown, key)
        if problem:
            raise RetrievalError(problem)
        return data

    retrieve_eval_data._trgad_guarded = True
    nb_eval.retrieve_eval_data = retrieve_eval_data


def _caps_mode() -> str:
    from trgad.pages import caps  # the one place that reads TRGAD_PREVIEW

    return "preview" if caps.PREVIEW else "full"


def _src_files(root: Path):
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if (not path.is_file() or "__pycache__" in parts or path.suffix in (".pyc", ".pyo")
                or any(p.endswith(".egg-info") for p in parts)):
            continue
        yield path


def inputs_key(book_root: Path, caps_mode: str) -> str:
    """Hash of src/ contents, the caps mode and the numeric stack's versions."""
    h = hashlib.sha256()
    src = book_root / "src"
    for path in _src_files(src):
        h.update(path.relative_to(src).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(f"{caps_mode}\0{sys.version}\0".encode())
    for dist in VERSIONED:
        try:
            h.update(f"{dist}={metadata.version(dist)}\0".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=missing\0".encode())
    return f"{caps_mode}-{h.hexdigest()[:16]}"


def _config_inited(app, config):
    from sphinx.util import logging

    app._trgad_t0 = time.perf_counter()
    app._trgad_caps = _caps_mode()
    config.trgad_inputs_key = inputs_key(Path(app.srcdir), app._trgad_caps)
    if getattr(app, "keep_going", False):
        config.nb_execution_raise_on_error = False
    logging.getLogger(__name__).info(
        f"[buildext] execution mode {config.nb_execution_mode}, raise on error "
        f"{config.nb_execution_raise_on_error}, inputs {config.trgad_inputs_key}")


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", {}) or {}
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    scripts[:] = kept


def _build_finished(app, exception):
    locks = getattr(app, "_trgad_cpu_locks", None)
    if locks and os.getpid() == getattr(app, "_trgad_main_pid", None):
        import shutil

        shutil.rmtree(locks, ignore_errors=True)
    if exception is not None or not hasattr(app.env, "nb_metadata"):
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    rows = []
    for docname, data in sorted(NbMetadataCollector.get_doc_data(app.env).items()):
        exec_data = data.get("exec_data")
        if not exec_data:
            continue
        rows.append({
            "page": docname,
            "method": exec_data.get("method"),
            "succeeded": exec_data.get("succeeded"),
            "seconds": exec_data.get("runtime"),
            "mtime": exec_data.get("mtime"),
        })
    out = Path(app.outdir).parent
    wall = time.perf_counter() - getattr(app, "_trgad_t0", time.perf_counter())
    report = {"builder": app.builder.name, "caps": getattr(app, "_trgad_caps", _caps_mode()),
              "wall_seconds_sphinx": wall, "pages": rows}
    (out / "execution-times.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "execution-times.txt").write_text(format_times(report))


def format_times(report) -> str:
    """A plain-text table of a build's per-page execution times."""
    lines = [f"{'page':28s} {'method':7s} {'seconds':>8s}"]
    total = 0.0
    for r in report["pages"]:
        secs = r["seconds"]
        total += secs or 0.0
        shown = "-" if secs is None else f"{secs:.1f}"
        lines.append(f"{r['page']:28s} {str(r['method']):7s} {shown:>8s}")
    lines.append(f"{'all pages (execution)':28s} {'':7s} {total:8.1f}")
    lines.append(f"{'whole Sphinx build (wall)':28s} {'':7s} {report['wall_seconds_sphinx']:8.1f}")
    lines.append(f"caps: {report.get('caps', 'unknown')}")
    return "\n".join(lines) + "\n"


#: Extensions loaded by this book that do not declare ``parallel_read_safe`` (Sphinx then
#: reads serially), and why each is safe: none keeps state outside a page's doctree.
UNDECLARED_BUT_SAFE = {
    # replaces TocTreeCollector.assign_section_numbers, run in the main process after the
    # merge; its numbering follows the order of env.tocs, which a parallel merge may change,
    # and this book's _toc.yml numbers nothing
    "sphinx_multitoc_numbering": "numbers sections in the main process; _toc.yml numbers none",
    "sphinx-mathjax-offline": "copies MathJax into _static at build-finished, in the main process",
    # its read-time transforms touch only the page's own doctree; its config and env
    # changes happen at config-inited and builder-inited, before the reading processes fork
    "sphinx_jupyterbook_latex": "per-page transforms; its global changes precede the fork",
}


def build_jobs(value: str | None, usable_cpus: int) -> int:
    """How many processes read (hence execute) pages side by side: ``usable_cpus``, or
    ``TRGAD_BUILD_JOBS`` (``value``) when it is set to a positive integer.  Raises ValueError
    naming the value otherwise."""
    if value is None or value.strip() == "":
        return max(1, usable_cpus)
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"TRGAD_BUILD_JOBS={value!r} is not a positive integer (1 reads the "
                         f"pages one after another)")
    return int(value)


def _builder_inited(app):
    for name in UNDECLARED_BUT_SAFE:
        ext = app.extensions.get(name)
        if ext is not None and ext.parallel_read_safe is None:
            ext.parallel_read_safe = True
    if app.parallel > 1:
        import tempfile

        app._trgad_main_pid = os.getpid()
        app._trgad_cpu_locks = tempfile.mkdtemp(prefix="trgad-build-cpus-")


def _pin_reading_process(app, docname, source):
    """In a reading process (not the main one), before its first page's kernel starts:
    claim a free CPU (an flock held while the process lives) and pin the process to it;
    with more processes than CPUs, the extra ones share a CPU (pinned by process id)."""
    if getattr(app, "_trgad_cpu_locks", None) is None or os.getpid() == app._trgad_main_pid:
        return
    if getattr(app, "_trgad_pinned_pid", None) == os.getpid():
        return
    import fcntl

    from trgad.runtime import compiled

    app._trgad_pinned_pid = os.getpid()
    for slot in range(len(os.sched_getaffinity(0))):
        fd = os.open(os.path.join(app._trgad_cpu_locks, f"cpu{slot}"), os.O_CREAT | os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        app._trgad_cpu_lock_fd = fd          # released when this process exits
        compiled.pin_to_one_cpu(slot)
        return
    compiled.pin_to_one_cpu(os.getpid())


def setup(app):
    try:
        jobs = build_jobs(os.environ.get("TRGAD_BUILD_JOBS"), len(os.sched_getaffinity(0)))
    except ValueError as e:        # one line and exit status 2, not a build traceback
        print(f"trgad: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    app.parallel = jobs
    # "env": when the value differs from the previous build's, Sphinx re-reads every page
    app.add_config_value("trgad_inputs_key", "", "env")
    # priority < 500: runs before myst-nb turns the config into its own settings
    app.connect("config-inited", _config_inited, priority=400)
    app.connect("builder-inited", _builder_inited)
    app.connect("source-read", _pin_reading_process)
    app.connect("html-page-context", _dedupe_scripts)
    app.connect("build-finished", _build_finished)
    _guard_eval_roles()
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
