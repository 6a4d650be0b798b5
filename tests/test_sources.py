"""The repository stands alone: nothing cites a path outside it (a reader's clone has none),
and the package uses JAX's public API only.

Checked: the book, the package, its build extension, the checks, the tests, CI and README.
"""
import re
from pathlib import Path

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
