"""c(beta) across the transition (trgad.topics.transition): the grid, the scan against the whole
graph's exact second derivative and Onsager, the peak on a known parabola, refused
schedules reported per beta."""
import math

import numpy as np
import pytest

from trgad import InputError
from trgad.physics import modes, trg
from trgad.topics import transition
from trgad.physics import exact


def test_beta_grid_is_denser_near_beta_c():
    g = transition.beta_grid(41)
    assert len(g) == 41 == len(set(g)) and g == sorted(g)
    assert g[0] == 0.3 and g[-1] == 0.6 and exact.BETA_C in g
    steps = np.diff(g)
    i = g.index(exact.BETA_C)
    assert steps[i] < steps[-1] / 10 and steps[i - 1] < steps[0] / 10
    with pytest.raises(InputError):
        transition.beta_grid(41, low=0.5)        # beta_c not inside
    with pytest.raises(InputError):
        transition.beta_grid(2)


@pytest.mark.slow
def test_scan_matches_the_whole_graph_and_carries_onsager():
    betas = [0.35, exact.BETA_C, 0.5]
    out = transition.scan(4, 6, betas)
    assert out["method"] == transition.DEFAULT_METHOD and [r["beta"] for r in out["rows"]] == betas
    for r in out["rows"]:
        ks = out["schedules"][r["schedule_group"]]
        assert ks == trg.truncation_schedule(4, 6, r["beta"])
        ref = modes.value_and_derivatives(r["beta"], ks, "whole", order=2)
        assert r["c"] == pytest.approx(ref["c"], rel=1e-9) and r["u"] == pytest.approx(ref["u"], abs=1e-12)
        assert r["error"] is None
    assert out["rows"][1]["onsager_c"] is None               # log divergence at beta_c
    assert out["rows"][0]["onsager_c"] == pytest.approx(exact.onsager(0.35)["c"], rel=1e-15)


@pytest.mark.slow
def test_refused_schedule_is_reported_in_its_row(monkeypatch):
    real = trg.truncation_schedule.trusted

    def refuse_at_half(chi, steps, beta):
        if beta == 0.5:
            raise InputError("chi=4 at step 3 (beta=0.5) cuts a multiplet")
        return real(chi, steps, beta)

    monkeypatch.setattr(trg.truncation_schedule, "trusted", refuse_at_half)
    out = transition.scan(4, 3, [0.4, 0.5])
    bad = out["rows"][1]
    assert bad["c"] is None and bad["schedule_group"] is None and "cuts a multiplet" in bad["error"]
    assert out["rows"][0]["c"] is not None and math.isfinite(out["rows"][0]["c"])


def test_peak_of_a_known_parabola():
    rows = [{"beta": b, "c": 2.0 - 30 * (b - 0.4412) ** 2} for b in np.linspace(0.40, 0.48, 9)]
    p = transition.peak(rows)
    assert p["interior"] and p["beta"] == pytest.approx(0.4412, abs=1e-12) and p["c"] == pytest.approx(2.0, abs=1e-12)
    edge = transition.peak([{"beta": b, "c": b} for b in (0.1, 0.2, 0.3)])
    assert not edge["interior"] and edge["beta"] == 0.3
    with pytest.raises(InputError):
        transition.peak(rows[:2])
