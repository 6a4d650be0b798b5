"""A page's English and Chinese editions, kept in step.

The Chinese edition of a page (``tenminutes-zh.md`` beside ``tenminutes.md``) is a page of
its own that the build executes like the English one.  Sphinx's translation route (gettext
catalogues) cannot carry the book's numbers: a translated paragraph is parsed again without
the page's kernel, so myst-nb's inline ``{eval}`name``` roles in it show nothing.  Two
executed pages keep every number live in both languages; :func:`problems` keeps them from
drifting apart.  What must agree (each problem is one line naming where):

* **code cells**, cell for cell: source, tags, ``source_hidden`` and the whole metadata block,
  so both editions compute the same values the same way;
* **inline values**: the ``{eval}`name``` roles, the same names in the same order;
* **labels**: the English page's targets ``(name)=``, as ``(name-zh)=`` in the Chinese, in the
  same order (one label cannot name two pages);
* **code and math in the prose**: fenced blocks (```` ```rust ````, ```` ```{literalinclude} ````
  with its options) and ``$$`` display math, identical and in the same order;
* **which English each Chinese block was written from**: the English prose is cut into
  *blocks* (a Markdown cell's text from one heading to the next, :func:`blocks`); block i of
  the Chinese edition carries a MyST comment line ``% en <hash>``, the :func:`fingerprint`
  of English block i when it was translated.  An English block that changes (words, not
  line breaks) fails, naming the block, until the translation follows and its hash is
  updated; ``python -m trgad.pages.editions EN ZH`` prints the problems and each English
  block's current hash.

MyST comment lines (``%``) are not prose: they count for no block's hash, in either edition.
"""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import lessons

__all__ = ["Block", "blocks", "fingerprint", "problems", "ZH_SUFFIX"]

#: What the Chinese edition appends to a page's file name and to each of its labels.
ZH_SUFFIX = "-zh"

_EVAL = re.compile(r"\{eval\}`([^`]+)`")
_TARGET = re.compile(r"^\(([\w-]+)\)=\s*$")
_HASH_LINE = re.compile(r"^%\s*en\s+([0-9a-f]+)\s*$")
_HEADING = re.compile(r"^#{1,6}\s")


@dataclass
class Block:
    """One block of prose: its text, the 1-based ``line`` where it starts and its ``name``
    (the number of the block on its page and its first words, for messages)."""

    text: str
    line: int
    number: int

    @property
    def name(self) -> str:
        first = next((s.strip() for s in self.text.splitlines() if _is_prose(s)), "")
        return f"block {self.number} (line {self.line}: {first[:50]!r})"

    @property
    def recorded(self) -> list[str]:
        """The hashes its ``% en <hash>`` lines record."""
        return [m.group(1) for s in self.text.splitlines() if (m := _HASH_LINE.match(s.strip()))]


def _text(page):
    return page if "\n" in str(page) else Path(page).read_text(encoding="utf-8")


def _is_prose(line):
    """Whether a line is read: not blank, not a comment ``%``, not a target ``(name)=``."""
    s = line.strip()
    return bool(s) and not s.startswith("%") and not _TARGET.match(s)


def blocks(page) -> list[Block]:
    """The prose blocks of a MyST notebook (a path, or its text): each Markdown cell cut
    before every heading line (outside fenced blocks; a target or comment just above a
    heading stays with it), blocks with nothing to read dropped, numbered from 1."""
    out, text = [], _text(page)
    page_lines = text.splitlines()
    for cell in lessons.cells(text):
        if cell.kind != "markdown":
            continue
        first = cell.line                      # the cell's source starts at its first
        while not page_lines[first - 1].strip():   # non-blank line
            first += 1
        current, start = [], first
        lines = cell.source.splitlines()
        inside = {i for a, b in _fenced_spans(lines) for i in range(a, b + 1)}
        for offset, line in enumerate(lines):
            if (offset not in inside and _HEADING.match(line)
                    and any(_is_prose(s) for s in current)):
                out.append((current, start))
                current, start = [], first + offset
            current.append(line)
        out.append((current, start))
    kept = [(lines, start) for lines, start in out if any(_is_prose(s) for s in lines)]
    return [Block("\n".join(lines), start + _first_read(lines), i)
            for i, (lines, start) in enumerate(kept, 1)]


def _first_read(lines):
    """Offset of the first line that is not blank and not a comment."""
    return next(i for i, s in enumerate(lines) if s.strip() and not s.strip().startswith("%"))


def fingerprint(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of a block's words: comment lines dropped,
    whitespace collapsed (re-wrapping a paragraph changes nothing)."""
    words = " ".join(" ".join(s for s in text.splitlines()
                              if not s.lstrip().startswith("%")).split())
    return hashlib.sha256(words.encode("utf-8")).hexdigest()[:12]


def _fenced_spans(lines):
    """(first, last) line indices of each fenced block (```...```) and ``$$`` math block
    among ``lines`` (a Markdown cell's), in order; an unclosed one runs to the end."""
    spans, i = [], 0
    while i < len(lines):
        s = lines[i].strip()
        opening = "```" if s.startswith("```") else "$$" if s.startswith("$$") else None
        if opening == "$$" and len(s) > 2 and s.endswith("$$"):
            spans.append((i, i))                                # $$ ... $$ on one line
        elif opening:
            j = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == opening),
                     len(lines) - 1)
            spans.append((i, j))
            i = j
        i += 1
    return spans


def _fenced(text):
    """The fenced blocks and $$ math of a page's prose (outside code cells), in order."""
    found = []
    for cell in lessons.cells(text):
        if cell.kind == "markdown":
            lines = cell.source.splitlines()
            found += ["\n".join(x.rstrip() for x in lines[a:b + 1])
                      for a, b in _fenced_spans(lines)]
    return found


def _targets(text):
    """The labels ``(name)=`` of a page, in order."""
    return [m.group(1) for s in text.splitlines() if (m := _TARGET.match(s.strip()))]


def _code_cells(text):
    """(metadata block, source) of each code cell, read from the page's lines."""
    lines, out = text.splitlines(), []
    for cell in lessons.cells(text):
        if cell.kind != "code":
            continue
        meta, i = "", cell.line                    # cell.line: the fence; i: the line after
        if i < len(lines) and lines[i].strip() == "---":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "---")
            meta = "\n".join(lines[i + 1:end])
        out.append((cell, meta))
    return out


def problems(english, chinese) -> list[str]:
    """Every way the Chinese edition (a path or text) has drifted from the English one, one
    line each; empty when they are in step (see the module docstring for what is compared)."""
    en, zh = _text(english), _text(chinese)
    out = []
    en_code, zh_code = _code_cells(en), _code_cells(zh)
    if len(en_code) != len(zh_code):
        out.append(f"code cells: {len(en_code)} in English, {len(zh_code)} in Chinese")
    for i, ((a, ma), (b, mb)) in enumerate(zip(en_code, zh_code), 1):
        what = [w for w, x, y in (("source", a.source, b.source), ("tags", a.tags, b.tags),
                                  ("source_hidden", a.source_hidden, b.source_hidden),
                                  ("metadata", ma, mb)) if x != y]
        if what:
            out.append(f"code cell {i} (English line {a.line}, Chinese line {b.line}) differs "
                       f"in {', '.join(what)}")
    en_kinds = [c.kind for c in lessons.cells(en)]
    if en_kinds != [c.kind for c in lessons.cells(zh)]:
        out.append("the cells alternate differently (Markdown between other code cells)")
    en_eval, zh_eval = _EVAL.findall(en), _EVAL.findall(zh)
    if en_eval != zh_eval:
        first = next((i for i, (x, y) in enumerate(zip(en_eval, zh_eval)) if x != y),
                     min(len(en_eval), len(zh_eval)))
        out.append(f"inline values differ from the {first + 1}th on: English "
                   f"{en_eval[first:first + 3]}, Chinese {zh_eval[first:first + 3]}")
    en_labels = [label + ZH_SUFFIX for label in _targets(en)]
    zh_labels = _targets(zh)
    if en_labels != zh_labels:
        out.append(f"labels: the Chinese should have {en_labels}, it has {zh_labels}")
    en_fenced, zh_fenced = _fenced(en), _fenced(zh)
    if en_fenced != zh_fenced:
        first = next((i for i, (x, y) in enumerate(zip(en_fenced, zh_fenced)) if x != y),
                     min(len(en_fenced), len(zh_fenced)))
        shown = (en_fenced + [""])[first].splitlines()[0] if en_fenced[first:] else "(none)"
        out.append(f"code or math in the prose differs at its {first + 1}th block "
                   f"(English: {shown[:50]!r})")
    en_blocks, zh_blocks = blocks(en), blocks(zh)
    if len(en_blocks) != len(zh_blocks):
        out.append(f"prose blocks: {len(en_blocks)} in English, {len(zh_blocks)} in Chinese")
    for a, b in zip(en_blocks, zh_blocks):
        now, kept = fingerprint(a.text), b.recorded
        if kept != [now]:
            said = "no `% en <hash>` line" if not kept else f"recorded {', '.join(kept)}"
            out.append(f"English {a.name} is {now}; its Chinese {b.name} has {said}: "
                       f"translate it again and record the new hash")
    return out


def main(argv=None) -> int:
    """``python -m trgad.pages.editions EN ZH``: the problems, then each English block's hash;
    exit 1 when there are problems, 2 for a wrong call."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not all(Path(a).is_file() for a in args):
        print("usage: python -m trgad.pages.editions ENGLISH.md CHINESE.md (two existing files)",
              file=sys.stderr)
        return 2
    found = problems(*args)
    for line in found:
        print(line)
    for block in blocks(args[0]):
        print(f"% en {fingerprint(block.text)}    <- {block.name}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
