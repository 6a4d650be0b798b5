"""Every ``{literalinclude}`` of a page shows what it means to: its file exists, its
``:start-after:`` (or ``:start-at:``) marker occurs exactly once in it (an edit that copies a marker would
silently show another part) and Sphinx's own reader (the one the book build uses) returns
some lines between the markers.  The staged crate's parts are included by marker comments
(``// [book: ...]`` ... ``// [book: end]``), so editing the crate does not shift them."""
import re
from pathlib import Path

import pytest
import yaml
from sphinx.directives.code import LiteralIncludeReader

BOOK = Path(__file__).resolve().parents[1] / "book"
_DIRECTIVE = re.compile(r"^```\{literalinclude\}\s+(\S+)\n((?::[\w-]+:.*\n)*)", re.M)


def includes():
    for page in sorted(BOOK.glob("*.md")):
        for m in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            # MyST reads a directive's options as YAML (quotes are YAML's)
            options = yaml.safe_load("\n".join(line[1:] for line in m.group(2).splitlines())) or {}
            yield pytest.param(page, m.group(1), options, id=f"{page.stem}:{m.start()}")


class _Config:
    source_encoding, highlight_language = "utf-8", "none"


@pytest.mark.parametrize("page,target,options", list(includes()))
def test_each_include_shows_lines_between_markers_found_once(page, target, options):
    path = (page.parent / target).resolve()
    assert path.is_file(), f"{page.name}: {target} does not exist"
    for start in ("start-after", "start-at"):
        if start in options:
            assert path.read_text(encoding="utf-8").count(options[start]) == 1, (page.name, options)
    text, lines = LiteralIncludeReader(str(path), options, _Config()).read()
    assert lines > 0 and text.strip(), (page.name, options)


def test_the_staged_crate_is_shown_where_users_look():
    found = {(p.name, t, o.get("start-after")) for p, t, o in (x.values for x in includes())}
    for page in ("tenminutes.md", "tenminutes-zh.md"):
        assert (page, "../tenferro-harness/staged/src/lib.rs", '// [book: value_and_grad]') in found
        assert (page, "../tenferro-harness/staged/examples/trg.rs", '// [book: detect call]') in found
