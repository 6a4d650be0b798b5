"""Print the build time of each page, from the build's own report.

    python _ext/build_times.py               # after any build: _build/execution-times.txt
    python _ext/build_times.py --markdown    # the same as a Markdown table (for README)
    python _ext/build_times.py --build-dir /tmp/out/_build

The numbers are written by _ext/buildext.py at the end of ``jupyter-book build`` from
myst-nb's execution records (the same data as the reproducibility page's table): for each
page the time from starting its kernel to closing it (the pages are executed inline, while
they are rendered), and the wall time of the whole Sphinx build.  Every build executes
every page (inline execution has no cache); for the cold-build figure quoted in README:

    rm -rf _build && time jupyter-book build . -W --keep-going
    python _ext/build_times.py --markdown
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
    lines.append(f"| all pages (execution) | {total:.0f} |")
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
    if report.get("caps") != "full":
        print(f"(caps in this build: {report.get('caps', 'unknown')}; the full book's times "
              f"need TRGAD_PREVIEW unset)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
