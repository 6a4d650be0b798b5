"""The repository stands alone: nothing cites a path outside it (a reader's clone has none).

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
