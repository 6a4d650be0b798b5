"""Sphinx extension used by the book's build (loaded from _config.yml, ``local_extensions``).

It does three small things that keep numbers on the pages honest:

1. **Keys the execution cache on the code the pages import.**  jupyter-cache hashes only a
   page's code cells, so a change under ``src/`` would otherwise leave stale numbers on a
   cached page.  Here the cache folder is ``_build/.jupyter_cache/<key>``, where the key
   hashes every file under ``src/``, the ``TRGAD_PREVIEW`` setting and the versions of
   Python, JAX, jaxlib, NumPy and SciPy.  Change any of them and every page runs again
   (changing this Sphinx setting also makes Sphinx re-read every page).  Older cache folders
   are pruned, keeping the most recent few, so switching back and forth stays cheap.
2. **Lets CI force execution**: ``TRGAD_EXECUTE=force`` (or ``off``/``cache``/``auto``)
   overrides ``execute.execute_notebooks`` from _config.yml for one build.
3. **Collects every failing page in a strict build.**  With ``-W --keep-going`` a failing
   cell is reported as a warning (which fails the build at the end) instead of aborting at
   the first failing page, and its traceback is written to ``_build/html/reports/``.
   Without ``-W`` the book's ``nb_execution_raise_on_error: true`` still stops the build.
4. **Keeps the browser console clean** for a first-time reader: drops script tags that
   appear twice on a page (sphinx-thebe 0.3 with Sphinx 7 adds its config script twice,
   raising "Identifier 'THEBE_JS_URL' has already been declared"), (the theme's
   ``default_mode`` is set in _config.yml's ``html_context``).
5. **Writes the build's own per-page execution times** to ``_build/execution-times.json``
   and ``_build/execution-times.txt`` (``python checks/build_times.py`` prints them).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

KEEP_CACHES = 3
_VERSIONED = ("jax", "jaxlib", "numpy", "scipy", "myst-nb", "nbclient")


def _src_files(root: Path):
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        parts = set(path.relative_to(root).parts)
        if "__pycache__" in parts or any(p.endswith(".egg-info") for p in parts):
            continue
        if path.suffix in (".pyc", ".pyo"):
            continue
        yield path


def cache_key(book_root: Path) -> str:
    """Hash of src/ contents, the preview switch and the numeric stack's versions."""
    h = hashlib.sha256()
    src = book_root / "src"
    for path in _src_files(src):
        h.update(path.relative_to(src).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    preview = os.environ.get("TRGAD_PREVIEW", "").strip().lower()
    preview = "preview" if preview not in ("", "0", "false", "no") else "full"
    h.update(preview.encode() + b"\0")
    h.update(sys.version.encode() + b"\0")
    for dist in _VERSIONED:
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode() + b"\0")
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=missing".encode() + b"\0")
    return f"{preview}-{h.hexdigest()[:16]}"


def _prune(parent: Path, keep: Path):
    if not parent.is_dir():
        return
    others = [p for p in parent.iterdir() if p.is_dir() and p != keep]
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in others[KEEP_CACHES - 1:]:
        shutil.rmtree(old, ignore_errors=True)


def _config_inited(app, config):
    from sphinx.util import logging

    app._trgad_t0 = time.perf_counter()

    log = logging.getLogger(__name__)
    mode = os.environ.get("TRGAD_EXECUTE", "").strip()
    if mode:
        if mode not in ("off", "force", "cache", "auto", "inline"):
            raise ValueError(f"TRGAD_EXECUTE={mode!r}: expected off, force, cache, auto or inline")
        config.nb_execution_mode = mode
    if getattr(app, "keep_going", False):
        config.nb_execution_raise_on_error = False
    book_root = Path(app.srcdir)
    base = Path(config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")
    if not base.is_absolute():
        base = book_root / base
    # An old unkeyed cache (a jupyter-cache folder directly in base) is removed.
    if (base / "global.db").exists():
        shutil.rmtree(base, ignore_errors=True)
    keyed = base / cache_key(book_root)
    keyed.mkdir(parents=True, exist_ok=True)
    os.utime(keyed)
    _prune(base, keyed)
    config.nb_execution_cache_path = str(keyed)
    log.info(f"[buildext] execution mode {config.nb_execution_mode}, raise on error "
             f"{config.nb_execution_raise_on_error}, cache {keyed}")


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
    report = {"builder": app.builder.name, "wall_seconds_sphinx": wall, "pages": rows}
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
    lines.append(f"{'all pages (kernel time)':28s} {'':7s} {total:8.1f}")
    lines.append(f"{'whole Sphinx build (wall)':28s} {'':7s} {report['wall_seconds_sphinx']:8.1f}")
    return "\n".join(lines) + "\n"


def setup(app):
    # priority < 500: runs before myst-nb turns the config into its own settings
    app.connect("config-inited", _config_inited, priority=400)
    app.connect("html-page-context", _dedupe_scripts)
    app.connect("build-finished", _build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
