"""Positions of a key DAG and of its unfolded tree (the root-cause chapter's first figure)."""
import pytest

import trgad  # noqa: F401  (float64 for JAX)
from trgad.keyed import chain, keylayout, keys
from trgad.keyed import engine as keyed
from trgad.runtime.validate import InputError


class Node:
    """A key of the reader's own: anything with an ``inputs`` tuple."""

    def __init__(self, name, *inputs):
        self.name, self.inputs = name, inputs


def chain_key(depth, fanout=2):
    return chain.build(keyed.leaf(2.0), depth, fanout).key


def test_heights_are_longest_paths_to_a_leaf():
    x = Node("x")
    m = Node("mul", x, x)
    d = Node("div", m)
    top = Node("add", d, x)
    h = keylayout.heights(top)
    assert [h[id(n)] for n in (x, m, d, top)] == [0, 1, 2, 3]


@pytest.mark.parametrize("depth, fanout", [(1, 2), (2, 2), (2, 3), (3, 2)])
def test_dag_layout_has_each_node_once_and_one_edge_per_use(depth, fanout):
    key = chain_key(depth, fanout)
    nodes, edges = keylayout.dag_layout(key, label=lambda k: k.prim)
    distinct = keys.postorder(key)
    assert len(nodes) == keys.dag_size(key) == len(distinct)
    assert len(edges) == sum(len(n.inputs) for n in distinct)
    assert len({(x, y) for x, y, _ in nodes}) == len(nodes), "no two nodes on one spot"
    # a value used K times by one multiplication chain: the parallel edges are numbered
    assert max(u for *_, u in edges) == 1, "y*y: two parallel edges, numbered 0 and 1"
    assert sorted(t for *_, t in nodes).count("mul") == depth * (fanout - 1)
    h = keylayout.heights(key)
    assert max(y for _, y, _ in nodes) == h[id(key)]
    assert all(y1 > y0 for _, y0, _, y1, _ in edges), "every edge goes up, from input to user"


@pytest.mark.parametrize("depth, fanout", [(1, 2), (2, 2), (2, 3), (3, 2)])
def test_tree_layout_has_one_node_per_path(depth, fanout):
    key = chain_key(depth, fanout)
    nodes, edges = keylayout.tree_layout(key, label=lambda k: k.prim)
    assert len(nodes) == keys.tree_size(key)
    assert len(edges) == len(nodes) - 1, "a tree"
    assert all(u == 0 for *_, u in edges)
    leaves = [x for x, y, t in nodes if y == 0]
    assert len(set(leaves)) == len(leaves), "leaves side by side"
    assert abs(min(leaves) + max(leaves)) < 1e-12, "centred on 0"
    assert sum(1 for _, _, t in nodes if t == "input") == fanout ** depth, "the leaf once per path"


def test_tree_layout_works_on_any_key_with_inputs():
    x = Node("x")
    y = Node("mul", x, x)
    nodes, edges = keylayout.tree_layout(Node("mul", y, y), label=lambda n: n.name)
    assert sorted(t for *_, t in nodes) == ["mul"] * 3 + ["x"] * 4
    dag_nodes, dag_edges = keylayout.dag_layout(Node("mul", y, y), label=lambda n: n.name)
    assert len(dag_nodes) == 3 and len(dag_edges) == 4


def test_tree_layout_refuses_a_tree_too_big_to_draw():
    key = chain_key(8)
    assert keys.tree_size(key) > keylayout.TREE_LAYOUT_MAX
    with pytest.raises(InputError, match="tree_layout draws at most"):
        keylayout.tree_layout(key)


def test_draw_puts_one_circle_per_node_and_one_arrow_per_edge():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = chain_key(2)
    for layout in (keylayout.dag_layout, keylayout.tree_layout):
        nodes, edges = layout(key, label=lambda k: k.prim)
        fig, ax = plt.subplots()
        assert keylayout.draw(ax, nodes, edges, "t") is ax
        assert len(ax.texts) == len(nodes) + len(edges), "a text per node, an annotation per edge"
        rads = [a.arrow_patch.get_connectionstyle().rad for a in ax.texts if getattr(a, "arrow_patch", None)]
        assert sorted(set(rads)) == ([-0.5, 0.0, 0.5] if layout is keylayout.dag_layout else [0.0])
        plt.close(fig)
