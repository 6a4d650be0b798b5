"""The repository stands alone: nothing cites a path outside it (a reader's clone has none).

Checked: the book, its build extension, the checks, CI, README and the modules that hold
the book's recorded data and display helpers.  (src/trgad/engine.py, being rewritten at
the time of writing, still cites one; widen FILES to all of src/ once it is gone.)
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\.\./shared|\bshared/(notes|seed)\b")


def test_no_reference_outside_the_repository():
    files = [p for d in ("book", "checks", "_ext", "tests", ".ci") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".md", ".py", ".yml", "") and "__pycache__" not in p.parts]
    files += [ROOT / f for f in ("README.md", "_config.yml", "src/trgad/recorded.py", "src/trgad/caps.py",
                                 "src/trgad/show.py")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.resolve() != Path(__file__).resolve()
            for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, f"references to paths outside the repository: {hits}"
