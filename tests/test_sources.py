"""The repository stands alone: nothing cites a path outside it (a reader's clone has none),
and the package uses JAX's public API only.

Checked: the book, the package, its build extension, the checks, the tests, CI and README.
"""
import importlib
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\.\./shared|\bshared/(notes|seed)\b")


def test_no_reference_outside_the_repository():
    files = [p for d in ("book", "src", "checks", "_ext", "tests", ".ci") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".md", ".py", ".yml", "") and "__pycache__" not in p.parts]
    files += [ROOT / f for f in ("README.md", "_config.yml", "_toc.yml", "requirements.txt", "pyproject.toml")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.resolve() != Path(__file__).resolve()
            for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, f"references to paths outside the repository: {hits}"


def test_the_package_uses_no_private_jax():
    """No ``jax._src`` (JAX's private modules, which change without notice) in ``src/``: not
    imported, not named; a docstring may cite JAX's source by its file path, with slashes."""
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "src").rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if "jax._src" in line]
    assert not hits, f"JAX's private modules used: {hits}"


#: A dotted name of the package (``trgad.physics.trg``, ``trgad.pages.show.num``), not part of
#: a longer name or a path.
REFERENCE = re.compile(r"(?<![\w./-])trgad(?:\.[A-Za-z_]\w*)+")
#: Words of the time before the Rust programs were installed by pip.
OLD_WORDS = ("cannot be installed",)


def _resolves(reference):
    """Whether ``reference`` names a module of the package, or an attribute of one."""
    parts = reference.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.util.find_spec(".".join(parts[:i])) is not None
        except ModuleNotFoundError:             # a parent that is not a package
            found = False
        if found:
            obj = importlib.import_module(".".join(parts[:i]))
            for name in parts[i:]:
                if not hasattr(obj, name):
                    return False
                obj = getattr(obj, name)
            return True
    return False


def test_every_dotted_trgad_name_is_importable():
    """Old module paths (``trgad.trg``, ``trgad.tenferro`` before the rooms) in the book, README,
    the Rust programs, the package, its build extension, the checks and the configuration."""
    files = [p for d in ("book", "src", "_ext", "checks", "tenferro-harness") for p in sorted((ROOT / d).rglob("*"))
             if p.is_file() and p.suffix in (".md", ".py", ".rs") and "target" not in p.parts]
    files += [ROOT / f for f in ("README.md", "_config.yml", "_toc.yml", "pyproject.toml")]
    hits = [f"{p.relative_to(ROOT)}:{i}: {m.group()}" for p in files
            for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            for m in REFERENCE.finditer(line) if not _resolves(m.group())]
    hits += [f"{p.relative_to(ROOT)}:{i}: {w!r}" for p in files
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             for w in OLD_WORDS if w in line]
    assert not hits, f"names that are no longer the package's: {hits}"


def test_no_line_is_longer_than_pyproject_allows():
    """``ruff check --select E501`` (line length, ``[tool.ruff] line-length`` in pyproject.toml)
    on the package, the tests, the checks and the build extension."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (requirements.txt installs it)")
    r = subprocess.run([ruff, "check", "--no-cache", "--select", "E501", "--output-format", "concise",
                        "src", "tests", "checks", "_ext", "conftest.py"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
