"""trgad.pages.flowchart: boxes where they are asked for, arrows from edge to edge, bad charts refused."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from trgad.pages import flowchart  # noqa: E402

C = [("#2a7", "#eaf6ee"), ("#b33", "#fbecec")]


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_box_is_centred_where_asked(ax):
    b = flowchart.box(ax, 2.0, 3.0, "x", C[0], w=1.5, h=0.5)
    assert b == flowchart.Box(2.0, 3.0, 1.5, 0.5)
    (patch,) = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert (patch.get_x(), patch.get_y(), patch.get_width(), patch.get_height()) == (1.25, 2.75, 1.5, 0.5)
    assert [t.get_text() for t in ax.texts] == ["x"]


def test_arrows_join_facing_edges(ax):
    g = flowchart.ARROW_GAP
    top, low = flowchart.Box(0, 4, 2, 1), flowchart.Box(0, 2, 2, 1)
    assert flowchart.arrow(ax, top, low, "k") == ((0, 3.5 - g), (0, 2.5 + g))
    assert flowchart.arrow(ax, low, top, "k") == ((0, 2.5 + g), (0, 3.5 - g))
    left, right = flowchart.Box(0, 1, 2, 1), flowchart.Box(5, 1, 2, 1)
    assert flowchart.arrow(ax, left, right, "k") == ((1 + g, 1), (4 - g, 1))
    assert flowchart.arrow(ax, right, left, "k") == ((4 - g, 1), (1 + g, 1))
    with pytest.raises(ValueError, match="itself"):
        flowchart.arrow(ax, top, top, "k")
    with pytest.raises(ValueError, match="positive"):
        flowchart.box(ax, 0, 0, "x", C[0], w=0)


def test_draw_makes_one_box_per_node_and_one_arrow_per_edge():
    nodes = {"a": (0, 0, "A"), "b": (0, 1, "B"), "c": (1, 0, "C")}
    fig = flowchart.draw(nodes, [("a", "b"), ("a", "c")], ["left", "right"], C)
    try:
        (ax,) = fig.axes
        boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
        assert len(boxes) == 3
        texts = [t.get_text() for t in ax.texts]
        assert {"left", "right", "A", "B", "C"} <= set(texts)
        arrows = [t for t in ax.texts if t.get_text() == "" and hasattr(t, "arrow_patch")]
        assert len(arrows) == 2
        # column 1's box sits one column width to the right of column 0's, on the same row
        xs = sorted((round(p.get_x() + p.get_width() / 2, 9), round(p.get_y(), 9)) for p in boxes)
        assert xs[2][0] - xs[0][0] == pytest.approx(3.6)
    finally:
        plt.close(fig)


@pytest.mark.parametrize("nodes, edges, message", [
    ({"a": (0, 0, "A")}, [("a", "z")], "unknown node 'z'"),
    ({"a": (0, 0, "A"), "b": (0, 0, "B")}, [], "both at"),
    ({"a": (2, 0, "A")}, [], "columns run"),
])
def test_draw_refuses_bad_charts(nodes, edges, message):
    with pytest.raises(ValueError, match=message):
        flowchart.draw(nodes, edges, ["left", "right"], C)


def test_draw_needs_a_colour_pair_per_column():
    with pytest.raises(ValueError, match="colour pairs"):
        flowchart.draw({"a": (0, 0, "A")}, [], ["left", "right"], C[:1])
