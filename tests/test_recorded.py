"""The recorded figures (trgad.pages.recorded) against this book's code and against each other."""
import re
from pathlib import Path

import yaml

from trgad.pages import recorded
from trgad.physics import trg

ROOT = Path(__file__).resolve().parents[1]


def test_the_reports_schedule_is_the_books():
    st = recorded.TENFERRO_STAGED
    assert trg.truncation_schedule(st["chi"], st["steps"], st["beta"]) == st["ks"]


def test_bit_for_bit_comparison_agrees_with_both_tables():
    """Where the report's JAX table has the step, its 'identical' matches the printed digits."""
    for n, verdict in recorded.TENFERRO_VS_JAX_BITS.items():
        assert n in recorded.TENFERRO_WHOLE
        if n in recorded.JAX_WHOLE:
            same = recorded.TENFERRO_WHOLE[n][4] == recorded.JAX_WHOLE[n][3]
            assert same == (verdict == "identical"), n
    # the 1-step gradient program has as many ops as the JAX jaxpr has equations
    assert recorded.TENFERRO_WHOLE[1][2] == recorded.JAX_WHOLE[1][0]


def test_the_label_links_to_the_appendix_in_the_toc():
    target = re.search(r"\]\(([^)]+)\.md\)", recorded.SOURCE).group(1)
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert f"book/{target}" in files
    assert (ROOT / "book" / f"{target}.md").is_file()


def test_the_sweep_stopped_at_the_first_row_over_its_cap():
    """The report's sweep stopped after the first step count whose ad.grad passed the cap."""
    tw, cap = recorded.TENFERRO_WHOLE, recorded.TENFERRO_SWEEP_CAP_MS
    last = max(tw)
    assert tw[last][0] > cap
    assert all(tw[n][0] <= cap for n in tw if n != last)
    assert recorded.TENFERRO_HANG["steps"] == last + 1

def test_the_by_value_figures_are_the_history_rows():
    """COMPUTEGRAPH_BY_VALUE restates the first history row's figures, for a chain the report ran."""
    bv, row = recorded.COMPUTEGRAPH_BY_VALUE, recorded.COMPUTEGRAPH_HISTORY[0]
    assert bv["commit"] in row[0]
    cost = row[3]
    assert f"depth {bv['depth']}" in cost
    for name in ("build", "materialize", "drop"):
        assert f"{name} {bv[name + '_s']:g} s" in cost, name
    assert bv["depth"] in recorded.TENFERRO_CHAIN, "the report timed tenferro-rs on the same chain"
