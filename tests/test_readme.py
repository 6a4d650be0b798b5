"""README stays a short front door: at most 6 KB; its two commands intact and the second one
exactly what .ci/run runs; the requirements split as it says; its table of the pages that
need the Rust programs and valgrind the same as what the pages' code cells run; the
benchmark's targets in trgad.bench's docstring, which it points to."""
import re
from pathlib import Path

from trgad import bench

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BOOK_COMMAND = "pip install -v -r requirements.txt && jupyter-book build ."
TEST_COMMAND = "pip install -v -r requirements-dev.txt && python -m pytest"
DEV_EXTRAS = {"pytest", "pytest-xdist", "playwright", "jupyterlab", "jupyterlab-myst", "ruff"}

# a code cell's call that starts one of the book's Rust programs / runs one under callgrind
RUNS_RUST = re.compile(r"\b(tenferro\.(whole|staged|chain|count)|patched\.suite|rows\.tenferro_rows)\(")
RUNS_VALGRIND = re.compile(r"\btenferro\.count\(")
CODE_CELL = re.compile(r"^```\{code-cell\}.*?^```$", re.M | re.S)


def test_readme_is_at_most_6_kb():
    assert README.stat().st_size <= 6 * 1024, README.stat().st_size


def test_readme_commands_and_ci_agree():
    text = README.read_text()
    lines = {line.strip() for line in text.splitlines()}
    assert BOOK_COMMAND in lines and TEST_COMMAND in lines
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"( {TEST_COMMAND} )\n" in ci                      # CI runs README's test command
    assert "jupyter-book build . -W --keep-going" in ci


def requirement_names(path):
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.append(re.split(r"[<>=!~ ]", line)[0].lower())
    return names


def test_requirements_split_book_from_developer_extras():
    book = requirement_names(ROOT / "requirements.txt")
    dev = requirement_names(ROOT / "requirements-dev.txt")
    assert dev[0] == "-r" and (ROOT / "requirements-dev.txt").read_text().count("-r requirements.txt") == 1
    assert DEV_EXTRAS <= set(dev) and not DEV_EXTRAS & set(book)
    assert any(name.startswith("actionlint") for name in dev)
    # README's Python-only install drops exactly the Rust programs' line
    harness = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if "tenferro-harness" in line]
    assert len(harness) == 1 and harness[0].startswith("./tenferro-harness")
    assert "grep -v tenferro-harness requirements.txt | pip install -r /dev/stdin" in README.read_text()


def pages_in_toc():
    return re.findall(r"(?:file|root): book/([\w-]+)", (ROOT / "_toc.yml").read_text())


def what_each_page_runs():
    needs = {}
    for stem in pages_in_toc():
        code = "\n".join(CODE_CELL.findall((ROOT / "book" / f"{stem}.md").read_text()))
        needs[stem] = ("the Rust programs and valgrind" if RUNS_VALGRIND.search(code)
                       else "the Rust programs" if RUNS_RUST.search(code) else "Python only")
    return needs


def readme_page_table():
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", README.read_text(), re.M)
    table = {}
    for pages, need in rows:
        if need in ("the Rust programs and valgrind", "the Rust programs", "Python only"):
            for stem in re.findall(r"`([\w-]+)`", pages) or ["*"]:
                table[stem] = need
    return table


def test_readme_page_table_matches_the_code_cells():
    actual = what_each_page_runs()
    table = readme_page_table()
    assert set(table) - {"*"} <= set(actual)
    assert table["*"] == "Python only"
    assert {s: n for s, n in actual.items() if n != "Python only"} == {s: n for s, n in table.items() if s != "*"}
    # the oracle sees both kinds: pages that count with callgrind and pages that only run
    assert {"the Rust programs and valgrind", "the Rust programs", "Python only"} == set(actual.values())


def test_benchmark_targets_documented_where_readme_points():
    doc = bench.__doc__
    assert all(f"``{name}``" in doc for name in [*bench.TARGETS, *bench.NOT_KEPT, *bench.TENFERRO_ROWS])
    text = README.read_text()
    assert "src/trgad/bench.py" in text and "book/reproducibility.md" in text
    assert "(bench-targets)=" in (ROOT / "book" / "reproducibility.md").read_text()
