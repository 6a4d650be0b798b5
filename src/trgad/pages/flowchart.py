"""Boxes and arrows for the book's flow charts (matplotlib; figure drawing only).

A flow chart here is a few columns of rounded boxes joined by arrows, the shape of a
Mermaid ``flowchart TB``: :func:`draw` places named nodes on a grid of columns and rows,
puts a title over each column and joins the nodes it is told to join; :func:`box` and
:func:`arrow` are its two pieces and work on any Axes.  Positions and sizes are in the
Axes' data units; nothing here is measured or computed from data.

Used by the source-report appendix (book/source-report.md) to redraw the report's chart.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

__all__ = ["Box", "box", "arrow", "draw"]

#: Space (data units) between an arrow's ends and the edges of the boxes it joins.
ARROW_GAP = 0.08


class Box(NamedTuple):
    """A drawn box: centre (x, y), width w and height h, in data units."""
    x: float
    y: float
    w: float
    h: float


def box(ax, x, y, text, colours, w=2.9, h=0.8, fontsize=10):
    """Draw a rounded box centred at (x, y) with ``text`` inside; return its :class:`Box`.

    ``colours``: a pair (edge colour, face colour), any matplotlib colours.  ``w``, ``h``:
    width and height in data units.  Raises ValueError for a width or height that is not
    positive.
    """
    if not (w > 0 and h > 0):
        raise ValueError(f"box width and height must be positive, got w={w!r}, h={h!r}")
    edge, face = colours
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.06",
                                fc=face, ec=edge, lw=1.4))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return Box(x, y, w, h)


def arrow(ax, a, b, colour):
    """Draw an arrow from box ``a`` to box ``b`` (two :class:`Box`) in ``colour``.

    Boxes in one column (same x) are joined edge to edge vertically (a's bottom to b's top
    when b is lower, else a's top to b's bottom); otherwise the facing side edges are joined
    (a's right to b's left when b is to the right, else a's left to b's right), each end
    :data:`ARROW_GAP` away from its box.  Returns the ((x, y) start, (x, y) end) pair.
    Raises ValueError when the two boxes are the same place.
    """
    (xa, ya, wa, ha), (xb, yb, wb, hb) = a, b
    if abs(xa - xb) < 1e-9:
        if abs(ya - yb) < 1e-9:
            raise ValueError(f"cannot draw an arrow from a box to itself at ({xa}, {ya})")
        down = 1 if yb < ya else -1
        start = (xa, ya - down * (ha / 2 + ARROW_GAP))
        end = (xb, yb + down * (hb / 2 + ARROW_GAP))
    else:
        right = 1 if xb > xa else -1
        start = (xa + right * (wa / 2 + ARROW_GAP), ya)
        end = (xb - right * (wb / 2 + ARROW_GAP), yb)
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.4))
    return start, end


def draw(nodes: Mapping[str, tuple], edges: Sequence[tuple], heads: Sequence[str],
         colours: Sequence[tuple], *, col_width=3.6, row_height=1.3, box_width=2.9,
         box_height=0.8, scale=0.8):
    """A flow chart on a new figure; returns the matplotlib Figure.

    ``nodes``: name -> (column, row, text), columns and rows counted from 0 at the top
    left; ``edges``: (from name, to name) pairs, one arrow each; ``heads``: a title per
    column; ``colours``: an (edge, face) colour pair per column, used for the column's
    boxes, title and the arrows leaving them.  Sizes are in data units, ``scale`` inches per
    unit.  Raises ValueError for an edge naming an unknown node, two nodes in one place, or
    a column (or row) outside the heads given (or negative).
    """
    ncols = len(heads)
    if len(colours) != ncols:
        raise ValueError(f"{len(colours)} colour pairs for {ncols} columns")
    places = {}
    for name, (col, row, _) in nodes.items():
        if not (0 <= col < ncols and row >= 0):
            raise ValueError(f"node {name!r} at column {col}, row {row}: columns run 0..{ncols - 1}, "
                             "rows from 0")
        if (col, row) in places:
            raise ValueError(f"nodes {places[(col, row)]!r} and {name!r} both at ({col}, {row})")
        places[(col, row)] = name
    for a, b in edges:
        for end in (a, b):
            if end not in nodes:
                raise ValueError(f"edge ({a!r}, {b!r}) names an unknown node {end!r}")
    nrows = 1 + max((row for _, row, _ in nodes.values()), default=0)
    width, height = ncols * col_width, nrows * row_height + 0.7
    fig, ax = plt.subplots(figsize=(width * scale, height * scale))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    for col, (head, (edge, _)) in enumerate(zip(heads, colours)):
        ax.text((col + 0.5) * col_width, nrows * row_height + 0.35, head, ha="center",
                va="center", fontsize=11, fontweight="bold", color=edge)
    drawn = {name: box(ax, (col + 0.5) * col_width, (nrows - row - 0.5) * row_height, text,
                       colours[col], w=box_width, h=box_height)
             for name, (col, row, text) in nodes.items()}
    for a, b in edges:
        arrow(ax, drawn[a], drawn[b], colours[nodes[a][0]][0])
    fig.tight_layout()
    return fig
