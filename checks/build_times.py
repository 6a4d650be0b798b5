"""Print the build time of each page, from the build's own report.

    python checks/build_times.py               # after any build: _build/execution-times.txt
    python checks/build_times.py --markdown    # the same as a Markdown table (for README)
    python checks/build_times.py --build-dir /tmp/out/_build

The numbers are written by checks/buildext.py at the end of ``jupyter-book build`` from
myst-nb's execution records (the same data as the reproducibility page's table): the kernel
time of each page and the wall time of the whole Sphinx build.  For the cold-build figure
quoted in README, measure a forced build from scratch:

    rm -rf _build && time TRGAD_EXECUTE=force jupyter-book build . -W --keep-going
    python checks/build_times.py --markdown

With the default cache mode, a page reused from the cache shows the time it took when it
was last executed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from buildext import format_times  # noqa: E402


def markdown(report) -> str:
    lines = ["| page | seconds |", "|---|---:|"]
    total = 0.0
    for r in report["pages"]:
        secs = r["seconds"] or 0.0
        total += secs
        lines.append(f"| {r['page']} | {secs:.0f} |")
    lines.append(f"| all pages (kernel time) | {total:.0f} |")
    lines.append(f"| whole Sphinx build (wall) | {report['wall_seconds_sphinx']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=str(ROOT / "_build"), help="the _build folder")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args(argv)
    path = Path(args.build_dir) / "execution-times.json"
    if not path.is_file():
        print(f"{path} not found: build the book first (jupyter-book build .)", file=sys.stderr)
        return 2
    report = json.loads(path.read_text())
    sys.stdout.write(markdown(report) if args.markdown else format_times(report))
    methods = {r["method"] for r in report["pages"]}
    if methods - {"force"}:
        print(f"(execution modes in this build: {sorted(methods)}; for cold-build times use "
              f"TRGAD_EXECUTE=force on an empty _build)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
