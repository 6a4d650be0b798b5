"""trgad.pages.show: what Jupyter displays for a value or table the book shows.

Oracles: IPython's own display formatter (what a kernel sends to JupyterLab and to
myst-nb), Python's format(), and markdown-it (the parser MyST is built on) for tables.
"""
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.formatters import DisplayFormatter
from markdown_it import MarkdownIt

from trgad.pages import show


def bundle(obj):
    data, _ = DisplayFormatter().format(obj)
    return data


@pytest.mark.parametrize("value, fmt, expected", [
    (np.float64(0.123456789), ".4f", "0.1235"),
    (jnp.asarray(-0.7044986795297), ".10f", "-0.7044986795"),
    (np.int64(1234567), ",", "1,234,567"),
    (7, "", "7"),
    (np.float32(2.5e-7), ".1e", "2.5 × 10⁻⁷"),
    (4.2e-11, ".0e", "4 × 10⁻¹¹"),
    (1.04e23, ".0e", "10²³"),
    (-1.0e5, ".0e", "-10⁵"),
    (5.1e8, ".1e", "5.1 × 10⁸"),
    (2.5, ".1e", "2.5"),
    (float("inf"), ".0e", "inf"),
])
def test_num_displays_as_the_formatted_text_only(value, fmt, expected):
    data = bundle(show.num(value, fmt))
    assert data == {"text/plain": expected}          # no quotes, no np.float64(...), no markdown


@pytest.mark.parametrize("value, fmt, bound, expected", [
    (1.07e-11, ".0e", "upper", "2 × 10⁻¹¹"),        # nearest would be 10⁻¹¹: false as "at most"
    (1.07e-11, ".0e", "lower", "10⁻¹¹"),
    (5.55e-7, ".0e", "lower", "5 × 10⁻⁷"),           # nearest would be 6 × 10⁻⁷: false as "at least"
    (4.06e-9, ".0e", "upper", "5 × 10⁻⁹"),
    (9.6e-5, ".0e", "upper", "10⁻⁴"),
    (3.0e-6, ".0e", "upper", "3 × 10⁻⁶"),             # exact: unchanged
    (0.4149, ".2f", "upper", "0.42"),
    (0.4151, ".2f", "lower", "0.41"),
    (0.4151, ".0%", "upper", "42%"),
    (0.4189, ".0%", "lower", "41%"),
])
def test_num_bounds_round_outward(value, fmt, bound, expected):
    shown = str(show.num(value, fmt, bound=bound))
    assert shown == expected


def test_num_bound_refuses_what_it_cannot_round():
    with pytest.raises(ValueError):
        show.num(0.5, "g", bound="upper")
    with pytest.raises(ValueError):
        show.num(0.5, ".1f", bound="above")


def test_num_unit_and_str():
    v = show.num(12.345, ".1f", "ms")
    assert str(v) == repr(v) == "12.3 ms"
    assert f"{v:>8}" == " 12.3 ms"


@pytest.mark.parametrize("bad", [True, np.zeros(2), "1.0", None, 1 + 2j])
def test_num_rejects_non_scalars(bad):
    with pytest.raises(TypeError):
        show.num(bad, ".2f")


def test_raw_values_are_what_show_avoids():
    # the reason for the helper: IPython shows these with type names or quotes
    assert bundle(np.float64(2.5))["text/plain"] == "np.float64(2.5)"
    assert bundle("lnZ/N")["text/plain"] == "'lnZ/N'"
    assert bundle(show.text("lnZ/N")) == {"text/plain": "lnZ/N"}


def _parse_table(md):
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    rows, row = [], None
    for tok in tokens:
        if tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
        elif tok.type == "tr_close":
            rows.append(row)
            row = None
    return rows


def test_table_is_a_markdown_table_with_the_formatted_cells():
    records = [{"steps": 1, "u": -1.0, "note": "a|b"}, {"steps": 20, "u": -0.704498679529762, "note": ""}]
    t = show.table(records, {"steps": "{steps}", "u": "{u:.6f}", "note": lambda r: r["note"] or None},
                   title="**Title:**", note="Recorded elsewhere.")
    data = bundle(t)
    assert set(data) == {"text/plain", "text/markdown"}
    md = data["text/markdown"]
    assert md.startswith("**Title:**\n\n") and md.endswith("\n\nRecorded elsewhere.")
    assert _parse_table(md) == [["steps", "u", "note"], ["1", "-1.000000", "a|b"], ["20", "-0.704499", ""]]
    plain = data["text/plain"].splitlines()
    assert plain[2].split() == ["steps", "u", "note"] and plain[-3].split() == ["20", "-0.704499"]


def test_table_rows_from_tuples_and_alignment():
    t = show.table({3: 0.5, 4: 0.25}.items(), {"n": "{0}", "x": "{1:.2f}"}, align="rr")
    md = t.markdown()
    assert md.splitlines()[1] == "|---:|---:|"
    assert _parse_table(md) == [["n", "x"], ["3", "0.50"], ["4", "0.25"]]


def test_grid_checks_row_length_and_alignment():
    assert _parse_table(show.grid(["a", "b"], [[1, "x"]]).markdown()) == [["a", "b"], ["1", "x"]]
    with pytest.raises(ValueError, match="row 0 has 3 cells"):
        show.grid(["a", "b"], [[1, 2, 3]])
    with pytest.raises(ValueError, match="one letter"):
        show.grid(["a", "b"], [[1, 2]], align="r")
