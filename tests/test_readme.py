"""README stays a short front page: under 8 KB, its two commands intact (CI runs the test
command), the benchmark's tenferro-rs rows named in its targets table, and the rest left to
the book's reproducibility page, which it points to."""
from pathlib import Path

from trgad import bench

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_readme_is_under_8_kb():
    assert README.stat().st_size < 8 * 1024, README.stat().st_size


def test_readme_keeps_its_commands_and_names_the_rows():
    text = README.read_text()
    assert "pip install -r requirements.txt && python -m pytest\n" in text
    assert "pip install -r requirements.txt && jupyter-book build .\n" in text
    assert all(f"`{row}`" in text for row in bench.TENFERRO_ROWS)
    assert "book/reproducibility.md" in text and (ROOT / "book" / "reproducibility.md").is_file()
