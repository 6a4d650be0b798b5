"""The chapters as a reader meets them: their cells, and the time it takes to read them.

A chapter is a MyST Markdown notebook (jupytext's ``myst`` format): front matter, Markdown,
and code cells fenced by a line ```` ```{code-cell} ipython3 ```` and a closing ```` ``` ````,
each with an optional metadata block between two ``---`` lines (``tags: [remove-input]``,
``jupyter: {source_hidden: true}``, ``mystnb: ...``).  :func:`cells` splits a page into its
cells; :func:`reading_time` measures what a reader of some pages meets (words of prose,
code cells shown) and the minutes that takes at a stated pace.  The introduction states
Part I's reading time from it at every build, so the figure follows the pages;
tests/test_lessons.py checks each lesson's shape with :func:`cells`.

A *claims cell* (:attr:`Cell.claims`) holds a sentence's guards and inline values: tagged
``remove-input`` (hidden in the HTML) and ``source_hidden`` (collapsed in JupyterLab).  A cell
is *shown* (:attr:`Cell.shown`) unless tagged ``remove-input`` or ``remove-cell``; a
``hide-input`` cell (a figure's code behind a toggle) counts as shown.

Only the subset of the format the book writes is read: flow-style tags (``tags: [a, b]``)
or one ``- tag`` per line, and ``source_hidden: true`` anywhere in the metadata block.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Cell", "cells", "han_characters", "page_path", "prose_words", "reading_time"]

#: Pace of the stated reading time: words of technical prose per minute (honest: a physicist
#: reading Part I found twice this pace too fast; tests/test_editions.py uses the same).
WORDS_PER_MINUTE = 100
#: Minutes to read and run one code cell a reader sees.
MINUTES_PER_CELL = 1.0
#: Pace for Chinese prose, in Han characters per minute at the pace of ``words_per_minute``:
#: technical Chinese takes about one and a half characters for an English word.
HAN_PER_WORD = 1.5

_FENCE = re.compile(r"^```\{code-cell\}")
_WORD = re.compile(r"[A-Za-z0-9]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


@dataclass
class Cell:
    """One cell: ``kind`` "markdown" or "code", its ``source`` (no fences, no metadata
    block), its ``tags``, whether ``source_hidden`` is set, and ``line``, the 1-based line
    of the page where it starts."""

    kind: str
    source: str
    tags: set = field(default_factory=set)
    source_hidden: bool = False
    line: int = 1

    @property
    def shown(self) -> bool:
        """A code cell whose input the HTML shows (possibly behind a toggle)."""
        return self.kind == "code" and not {"remove-input", "remove-cell"} & self.tags

    @property
    def claims(self) -> bool:
        """A code cell hidden both in the HTML and in JupyterLab."""
        return self.kind == "code" and "remove-input" in self.tags and self.source_hidden


def _metadata(lines):
    """(tags, source_hidden) of a code cell's metadata block (its lines, without ``---``)."""
    tags, hidden, in_tags = set(), False, False
    for line in lines:
        flow = re.match(r"\s*tags:\s*\[(.*)\]\s*$", line)
        if flow:
            tags |= {t.strip().strip("'\"") for t in flow.group(1).split(",") if t.strip()}
            in_tags = False
        elif re.match(r"\s*tags:\s*$", line):
            in_tags = True
        elif in_tags and re.match(r"\s*-\s+\S", line):
            tags.add(line.split("-", 1)[1].strip().strip("'\""))
        else:
            in_tags = False
        if re.match(r"\s*source_hidden:\s*true\s*$", line):
            hidden = True
    return tags, hidden


def cells(page) -> list[Cell]:
    """The cells of the MyST notebook ``page`` (a path, or its text if it has a newline),
    in order; the front matter is skipped and blank Markdown between cells dropped."""
    text = page if "\n" in str(page) else Path(page).read_text(encoding="utf-8")
    lines = text.splitlines()
    i = 0
    if lines and lines[0].strip() == "---":                     # front matter
        i = next(j for j in range(1, len(lines)) if lines[j].strip() == "---") + 1
    out, md, md_start = [], [], i
    while i < len(lines):
        if not _FENCE.match(lines[i]):
            md.append(lines[i])
            i += 1
            continue
        if "".join(md).strip():
            out.append(Cell("markdown", "\n".join(md).strip("\n"), line=md_start + 1))
        start, i = i, i + 1
        tags, hidden = set(), False
        if i < len(lines) and lines[i].strip() == "---":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "---")
            tags, hidden = _metadata(lines[i + 1:end])
            i = end + 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        out.append(Cell("code", "\n".join(body), tags, hidden, line=start + 1))
        i += 1
        md, md_start = [], i
    if "".join(md).strip():
        out.append(Cell("markdown", "\n".join(md).strip("\n"), line=md_start + 1))
    return out


def page_path(name) -> Path:
    """Path of the book page ``name`` (e.g. ``"phenomenon.md"``): as given if it exists
    (relative to the working directory, the book's folder when a page runs in the build or
    in JupyterLab), else in the ``book/`` folder of the nearest folder above this module
    that has one (a page executed elsewhere, e.g. by ``nbconvert`` from /tmp).  Raises
    FileNotFoundError naming the page when neither exists."""
    given = Path(name)
    if given.exists():
        return given
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "book" / given
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"book page {name!r}: not in {Path.cwd()} nor in a book/ folder "
                            f"above {Path(__file__).resolve().parent}")


def prose_words(markdown: str) -> int:
    """Words of a Markdown cell a reader reads: whitespace-separated tokens with a letter or
    digit, after dropping fences (a directive's title is kept) and options (``:label:``),
    target labels (``(name)=``), MyST comment lines (``% ...``, not rendered) and link
    targets (``[text](target)`` counts as ``text``)."""
    kept = []
    for line in markdown.splitlines():
        s = line.strip()
        if re.match(r"^:[\w-]+:", s) or re.match(r"^\([\w-]+\)=$", s) or s.startswith("%"):
            continue
        if s.startswith("```"):                       # keep a directive's title only
            line = s.partition("}")[2] if s.startswith("```{") else ""
        kept.append(re.sub(r"\]\([^)]*\)", "]", line))
    return sum(1 for w in _HAN.sub(" ", " ".join(kept)).split() if _WORD.search(w))


def han_characters(markdown: str) -> int:
    """Han (Chinese) characters of a Markdown cell a reader reads, MyST comment lines
    (``% ...``) dropped; :func:`prose_words` counts the words around them."""
    return sum(len(_HAN.findall(line)) for line in markdown.splitlines()
               if not line.strip().startswith("%"))


def reading_time(pages, words_per_minute=WORDS_PER_MINUTE, minutes_per_cell=MINUTES_PER_CELL):
    """What a reader of ``pages`` (MyST notebooks, found by :func:`page_path`) meets, and how
    long it takes.

    Returns ``{"words": int, "han": int, "cells": int, "minutes": float}``: the words of
    prose (:func:`prose_words` of every Markdown cell), its Han characters
    (:func:`han_characters`, read at :data:`HAN_PER_WORD` per word: a Chinese page), the
    code cells shown (:attr:`Cell.shown`, those in exercise solutions included), and
    ``(words + han / HAN_PER_WORD) / words_per_minute + cells * minutes_per_cell``.  Claims
    cells are run, not read, and count for nothing.
    """
    words = han = shown = 0
    for page in pages:
        for cell in cells(page_path(page)):
            if cell.kind == "markdown":
                words += prose_words(cell.source)
                han += han_characters(cell.source)
            elif cell.shown:
                shown += 1
    return {"words": words, "han": han, "cells": shown,
            "minutes": (words + han / HAN_PER_WORD) / words_per_minute + shown * minutes_per_cell}
