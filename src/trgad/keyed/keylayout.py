"""Where to draw a key DAG and the tree it unfolds into: positions only, for a figure.

Engine side.  The root-cause chapter (``book/rootcause.md``) draws one small key twice: as
the DAG held in memory (each distinct key once, one edge per use, so a value used twice has
two parallel edges) and unfolded into the tree that a walk without a memo sees (one node per
path from the top).  These functions compute the positions; the chapter draws them with
matplotlib.  Any key whose nodes have an ``inputs`` tuple works: :class:`trgad.keyed.keys.Key`, or
a key class a reader writes.
"""
from __future__ import annotations

from .keys import postorder, tree_size
from ..runtime.validate import InputError

#: The largest tree :func:`tree_layout` lays out (nodes): a drawing of more is unreadable.
TREE_LAYOUT_MAX = 200


def heights(key):
    """Height of every distinct node of ``key``'s DAG, by ``id``: 0 for a leaf, else 1 plus
    the largest height among its inputs."""
    h = {}
    for node in postorder(key):
        h[id(node)] = 1 + max((h[id(i)] for i in node.inputs), default=-1)
    return h


def dag_layout(key, label=str):
    """Positions of the distinct nodes of ``key``'s DAG (nodes matched by identity).

    Returns ``(nodes, edges)``.  ``nodes``: one ``(x, y, text)`` per distinct node, ``y`` its
    height (:func:`heights`; leaves at 0), the nodes of one height at x = 0, 1, ... centred
    on 0, ``text = label(node)``.  ``edges``: one ``(x0, y0, x1, y1, use)`` per use of an
    input, from the input to its user; ``use`` numbers the parallel edges between the same
    two nodes (0, 1, ...), so that a figure can draw them apart.
    """
    h, order = heights(key), postorder(key)
    rows = {}
    for node in order:
        rows.setdefault(h[id(node)], []).append(node)
    pos = {id(n): (i - (len(row) - 1) / 2, y) for y, row in rows.items() for i, n in enumerate(row)}
    nodes = [(*pos[id(n)], label(n)) for n in order]
    edges = []
    for n in order:
        uses = {}
        for i in n.inputs:
            uses[id(i)] = uses.get(id(i), -1) + 1
            edges.append((*pos[id(i)], *pos[id(n)], uses[id(i)]))
    return nodes, edges


def tree_layout(key, label=str):
    """Positions of ``key`` unfolded into a tree: one node per path from ``key``.

    Same return format as :func:`dag_layout` (``use`` is always 0: a tree has no parallel
    edges).  ``y`` is the node's height, as in the DAG, so the two drawings line up level by
    level; the leaves sit at x = 0, 1, ... in depth-first order (inputs left to right),
    centred on 0, and each other node above the mean of its inputs.  Raises
    :class:`trgad.runtime.validate.InputError` if the tree has more than :data:`TREE_LAYOUT_MAX` nodes.
    """
    size = tree_size(key)
    if size > TREE_LAYOUT_MAX:
        raise InputError(f"the key's tree has {size:,} nodes: tree_layout draws at most "
                         f"{TREE_LAYOUT_MAX} (use a shallower key)")
    h, nodes, edges, leaves = heights(key), [], [], [0]

    def place(node):                  # recursion depth <= TREE_LAYOUT_MAX
        if node.inputs:
            xs = [place(i) for i in node.inputs]
            x = sum(xs) / len(xs)
            edges.extend((xi, h[id(i)], x, h[id(node)], 0) for xi, i in zip(xs, node.inputs))
        else:
            x, leaves[0] = leaves[0], leaves[0] + 1
        nodes.append((x, h[id(node)], label(node)))
        return x

    place(key)
    shift = (leaves[0] - 1) / 2
    return ([(x - shift, y, t) for x, y, t in nodes],
            [(x0 - shift, y0, x1 - shift, y1, u) for x0, y0, x1, y1, u in edges])


def draw(ax, nodes, edges, title=""):
    """Draw a layout of :func:`dag_layout` or :func:`tree_layout` on a matplotlib ``Axes``.

    Each node is its text in a circle; each edge an arrow from the user down to its input
    (a key holds its inputs' keys), parallel edges bent apart.  Uses only ``ax``'s own
    methods; returns ``ax``.
    """
    for x0, y0, x1, y1, use in edges:
        twins = sum((a, b, c, d) == (x0, y0, x1, y1) for a, b, c, d, _ in edges)
        rad = 0.0 if twins == 1 else 0.5 * (2 * use / (twins - 1) - 1)
        ax.annotate("", (x0, y0), (x1, y1), arrowprops=dict(
            arrowstyle="-|>", color="0.35", shrinkA=12, shrinkB=12,
            connectionstyle=f"arc3,rad={rad}"))
    for x, y, text in nodes:
        ax.text(x, y, text, ha="center", va="center", fontsize=12,
                bbox=dict(boxstyle="circle", fc="white", ec="tab:blue"))
    xs, ys = [n[0] for n in nodes], [n[1] for n in nodes]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    return ax
