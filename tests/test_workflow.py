"""The GitHub Actions workflow that publishes the book (.github/workflows/book.yml): actionlint
finds nothing in it (installed by requirements-dev.txt; without it this fails in CI, skips
elsewhere), and it builds as .ci/run and README do: README's install, the strict build,
_build/html handed to GitHub Pages."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"


def actionlint():
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found is None:
        if os.environ.get("CI"):
            raise RuntimeError("actionlint is not installed: pip install -r requirements-dev.txt")
        pytest.skip("actionlint is not installed (pip install -r requirements-dev.txt)")
    return found


def test_actionlint_finds_nothing():
    result = subprocess.run([actionlint(), "-no-color", str(WORKFLOW)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_would_catch_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("needs: build", "needs: no-such-job"))
    result = subprocess.run([actionlint(), "-no-color", str(broken)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "no-such-job" in result.stdout


def test_workflow_builds_as_ci_does_and_publishes_the_html():
    text = WORKFLOW.read_text()
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    install = "pip install -v -r requirements.txt"
    assert f"run: {install}\n" in text and f"{install} && jupyter-book build ." in readme
    assert "run: jupyter-book build . -W --keep-going\n" in text and "jupyter-book build . -W --keep-going" in ci
    assert "apt-get install -y -q valgrind" in text and "rustup" in text
    for action in ("actions/configure-pages@", "actions/upload-pages-artifact@", "actions/deploy-pages@"):
        assert f"uses: {action}" in text
    assert "path: _build/html\n" in text
