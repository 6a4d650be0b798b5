"""Values and tables as the book shows them, in the built HTML and in JupyterLab alike.

The chapters put computed numbers into their prose with MyST's inline role
``{eval}`name``: myst-nb evaluates ``name`` in the page's kernel while it builds the page
(execution mode ``inline``), and the ``jupyterlab-myst`` extension does the same in
JupyterLab when the Markdown cell is run, after the cells above it.  Both show the object's
rich display; for plain objects that is ``text/plain``, its ``repr``.  A raw float would
show all its digits and a NumPy scalar ``np.float64(...)``, so every number a page shows
goes through :func:`num` (phrases through :func:`text`), whose ``repr`` is exactly the
formatted text.  (A ``str`` evaluates to its repr, quoted; both renderers happen to strip
the quotes, but not the escapes of a repr.)  The role takes a variable *name* only
(myst-nb's ``nb_eval_name_regex``), so the formatting lives in the code cell, and the
name must be set in a cell *above* the sentence that shows it.

Tables: :func:`table` (rows of records and one formatter per column) and :func:`grid`
(rows already formatted) return an object that displays as a Markdown table, so a cell
that shows a table is the computation plus one line of output.

Why and how the book uses this: the reproducibility chapter ("Reading a chapter in Jupyter").
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["Text", "Table", "num", "text", "table", "grid"]


class Text:
    """A piece of text shown verbatim: its ``repr`` and ``str`` are the text, without quotes.

    It has only a ``text/plain`` rendering, which both renderers put into the sentence as
    is.  (A ``text/markdown`` rendering, e.g. for ``$...$`` math, works in both too, but
    JupyterLab sets it as a separate inline block with a paragraph's spacing, so the book
    keeps math in its prose and computed values plain.)
    """

    __slots__ = ("text",)

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        self.text = text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self.text, spec)

    def __eq__(self, other) -> bool:
        if isinstance(other, Text):
            return self.text == other.text
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.text)


def _scalar(x):
    """A Python int or float from a Python, NumPy or JAX real scalar (0-d array)."""
    if isinstance(x, bool):
        raise TypeError("num() shows numbers, not booleans (use text())")
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    dtype = getattr(x, "dtype", None)
    if dtype is not None and getattr(x, "shape", None) == ():
        if dtype.kind in "iu":
            return int(x)
        if dtype.kind == "f":
            return float(x)
    raise TypeError(f"num() needs a real scalar, got {type(x).__name__}: {x!r}")


def num(x, fmt: str = "", unit: str | None = None, bound: str | None = None) -> Text:
    """``x`` formatted with ``format(x, fmt)``, optionally followed by a space and ``unit``.

    ``x``: a Python, NumPy or JAX real scalar (an integer stays an integer, so ``","``
    groups thousands).  ``fmt``: a format spec as in ``f"{x:fmt}"``, e.g. ``".3f"``,
    ``".1e"``, ``","``; empty gives ``str(x)``.  An ``e`` format is shown as a power of ten
    in a sentence's type, not as code: ``format(4e-11, ".0e")`` gives ``4 × 10⁻¹¹`` and a
    mantissa of exactly 1 only the power (``10²³``).  Raises TypeError for anything else
    (an array, a bool, a string).  Non-finite values are shown as ``nan``/``inf``; the
    browser check of the built book flags them on a page.  ``bound``: ``"upper"`` or
    ``"lower"`` rounds outward in the last digit shown, so that "at most" (resp. "at
    least") before the number stays true (``num(1.07e-11, ".0e", bound="upper")`` is
    ``2 × 10⁻¹¹``, not ``10⁻¹¹``); only with an ``e``, ``f`` or ``%`` format
    (ValueError otherwise).
    """
    value = _scalar(x)
    shown = format(value, fmt)
    if bound is not None and math.isfinite(value):
        shown = _outward(value, fmt, shown, bound)
    if fmt.endswith(("e", "E")) and math.isfinite(value):
        shown = _power_of_ten(shown)
    return Text(shown if unit is None else f"{shown} {unit}")


def _outward(value, fmt, shown, bound):
    """``shown`` moved one unit of its last digit away from ``value`` where rounding went
    the wrong way for an upper (lower) bound."""
    if bound not in ("upper", "lower"):
        raise ValueError(f"bound={bound!r} is not known: choose 'upper' or 'lower'")
    kind = fmt[-1:] if fmt else ""
    if kind not in ("e", "E", "f", "%"):
        raise ValueError(f"bound needs an 'e', 'f' or '%' format, not {fmt!r}")
    scale = 100.0 if kind == "%" else 1.0
    rounded = float(shown.rstrip("%")) / scale
    if (rounded >= value) if bound == "upper" else (rounded <= value):
        return shown
    digits = int(fmt[fmt.index(".") + 1:-1]) if "." in fmt else 6
    exponent = int(shown.lower().split("e")[1]) if kind in "eE" else 0
    unit = 10.0 ** (exponent - digits) / scale
    return format(rounded + unit if bound == "upper" else rounded - unit, fmt)


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _power_of_ten(shown):
    """``"4e-11"`` -> ``"4 × 10⁻¹¹"``, ``"1e+23"`` -> ``"10²³"``, ``"2.5e+00"`` -> ``"2.5"``."""
    mantissa, exponent = shown.lower().split("e")
    power = int(exponent)
    if power == 0:
        return mantissa
    ten = "10" + str(power).translate(_SUPERSCRIPT)
    if mantissa.lstrip("-") == "1":
        return ("-" if mantissa.startswith("-") else "") + ten
    return f"{mantissa} × {ten}"


def text(s) -> Text:
    """A phrase computed by a cell (a verdict, a message, a version): shown as is, no quotes."""
    return Text(str(s))


def _cell(value) -> str:
    s = "" if value is None else str(value)
    return s.replace("|", "\\|").replace("\n", " ")


class Table:
    """A Markdown table (``text/markdown``) with a plain-text fallback (``text/plain``).

    ``header``: column titles; ``rows``: lists of cell strings; ``title``/``note``:
    Markdown paragraphs shown above/below the table.
    """

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[str]],
                 title: str | None = None, note: str | None = None, align: str | None = None):
        self.header = [_cell(h) for h in header]
        self.rows = [[_cell(c) for c in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(f"table row {i} has {len(row)} cells, the header has "
                                 f"{len(self.header)}: {row!r}")
        if align is not None and len(align) != len(self.header):
            raise ValueError(f"align={align!r} must have one letter (l, r or c) per column "
                             f"({len(self.header)})")
        self.align = align
        self.title = title
        self.note = note

    def markdown(self) -> str:
        marks = {"l": "---", "r": "---:", "c": ":---:"}
        rule = [marks[a] for a in self.align] if self.align else ["---"] * len(self.header)
        lines = ["| " + " | ".join(self.header) + " |", "|" + "|".join(rule) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        parts = ([self.title] if self.title else []) + ["\n".join(lines)]
        parts += [self.note] if self.note else []
        return "\n\n".join(parts)

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        widths = [max(len(r[i]) for r in [self.header] + self.rows) for i in range(len(self.header))]
        fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
        lines = [fmt(self.header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in self.rows]
        parts = ([self.title] if self.title else []) + ["\n".join(lines)]
        parts += [self.note] if self.note else []
        return "\n\n".join(parts)


Column = str | Callable[[object], object]


def _apply(spec: Column, row):
    if callable(spec):
        return spec(row)
    if isinstance(row, Mapping):
        return spec.format(**row)
    if isinstance(row, Sequence) and not isinstance(row, str):
        return spec.format(*row)
    return spec.format(row)


def table(rows: Iterable, columns: Mapping[str, Column], *, title: str | None = None,
          note: str | None = None, align: str | None = None) -> Table:
    """A table with one row per record and one column per entry of ``columns``.

    ``columns`` maps each column title to either a format string filled from the record
    (``"{steps}"``, ``"{grad:.15f}"``: keyword fields for a dict record, positional for a
    tuple) or a function of the record returning the cell (any value; ``None`` is an empty
    cell).  ``align``: one letter per column, ``l``/``r``/``c`` (default: left).
    """
    rows = list(rows)
    body = [[_apply(spec, r) for spec in columns.values()] for r in rows]
    return Table(list(columns), body, title=title, note=note, align=align)


def grid(header: Sequence[str], rows: Iterable[Sequence], *, title: str | None = None,
         note: str | None = None, align: str | None = None) -> Table:
    """A table from rows of ready-made cells (each converted with ``str``)."""
    return Table(header, [list(r) for r in rows], title=title, note=note, align=align)
