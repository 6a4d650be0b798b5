"""The TRG against independent oracles: exact small tori, Onsager, finite differences."""
import math

import jax
import numpy as np
import pytest

import trgad
from trgad.physics import exact, ising, svd, trg, whole, svdrules
from trgad.pages import recorded

BETA = 0.3
SCHEDULE = trg.truncation_schedule(16, 30, BETA)

# Recorded in the source report (JAX 0.12.0.1 and tenferro-rs 0.8.0, identical digits).
RECORDED_GRADS = {n: row[4] for n, row in recorded.TENFERRO_WHOLE.items()}


def test_schedule_for_chi_16():
    assert SCHEDULE[:5] == [2, 4, 4, 16, 16]
    assert all(k == 16 for k in SCHEDULE[3:])
    assert trg.truncation_schedule(4, 6, BETA) == [2, 4, 4, 4, 4, 4]


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_small_tori_equal_exact_enumeration(steps):
    ref = exact.torus_exact(BETA, steps)
    lnz, dlnz = whole.value_and_grad(BETA, SCHEDULE[:steps], jit=False)
    assert lnz == pytest.approx(ref["lnz_per_site"], rel=1e-12)
    assert dlnz == pytest.approx(ref["dlnz"], rel=1e-12)
    assert dlnz == pytest.approx(RECORDED_GRADS[steps], rel=1e-12)


def test_exact_enumeration_one_step_closed_form():
    # two sites bonded four times: Z = 2 * 2 cosh(4 beta)
    ref = exact.torus_exact(BETA, 1)
    assert ref["lnz_per_site"] == pytest.approx(math.log(4 * math.cosh(4 * BETA)) / 2, rel=1e-14)
    assert ref["dlnz"] == pytest.approx(2 * math.tanh(4 * BETA), rel=1e-14)


@pytest.mark.slow
def test_twenty_steps_against_onsager_and_recorded(whole20, schedule20):
    assert schedule20 == SCHEDULE[:20]
    lnz, dlnz = whole20
    ref = exact.onsager(BETA)
    assert abs(lnz - ref["lnz_per_site"]) < 1e-7
    assert abs(-dlnz - ref["u"]) < 1e-5
    assert lnz == pytest.approx(recorded.TENFERRO_STAGED["lnz_per_site"], abs=1e-15)
    assert -dlnz == pytest.approx(recorded.TENFERRO_STAGED["u"], abs=1e-13)


@pytest.mark.slow
def test_thirty_steps_finite_and_equal_to_finite_differences():
    f = jax.jit(whole.lnz_fn(SCHEDULE))
    vg = jax.jit(jax.value_and_grad(whole.lnz_fn(SCHEDULE)))
    lnz, g = vg(BETA)
    assert np.isfinite(float(lnz)) and np.isfinite(float(g))
    h = 1e-5
    fd = (float(f(BETA + h)) - float(f(BETA - h))) / (2 * h)
    assert float(g) == pytest.approx(fd, rel=1e-7)


@pytest.mark.slow
def test_near_critical_point_finite():
    beta = exact.BETA_C * 0.999
    sched = trg.truncation_schedule(8, 12, beta)
    lnz, g = whole.value_and_grad(beta, sched)
    assert np.isfinite(lnz) and np.isfinite(g)
    assert -g == pytest.approx(exact.onsager(beta)["u"], abs=5e-2)


@pytest.mark.slow
def test_second_derivative_finite_and_equal_to_finite_differences():
    # 6 steps: from step 5 on the discarded singular values are exactly degenerate,
    # which is where the stock SVD rule gives NaN.
    sched = SCHEDULE[:6]
    g = jax.grad(whole.lnz_fn(sched))
    g2 = float(jax.grad(g)(BETA))
    h = 1e-4
    fd = (float(g(BETA + h)) - float(g(BETA - h))) / (2 * h)
    assert np.isfinite(g2)
    assert g2 == pytest.approx(fd, rel=1e-6)


# ---- the ranks of the first steps, the spectrum at the cut, the terms of lnZ/N -------------

def _rank(matrix):
    return svd.numerical_rank(np.linalg.svd(matrix, compute_uv=False))


def _parity_even(rng):
    T = rng.normal(size=(2, 2, 2, 2))
    return T * (np.indices(T.shape).sum(axis=0) % 2 == 0)


def test_ising_tensor_has_rank_two_because_it_sums_one_spin_not_because_of_parity():
    # Oracle: a sum over one two-valued spin of product terms has rank <= 2 in every
    # unfolding; a generic tensor with the same parity rule has full rank 4.
    for beta in (1e-3, 0.3, exact.BETA_C, 1.0, 5.0):
        T = ising.initial_tensor(beta, trg.NUMPY)
        assert [svd.numerical_rank(s) for s in trg.split_spectra(T)] == [2, 2]
    rng = np.random.default_rng(0)
    for _ in range(5):
        R = _parity_even(rng)
        assert np.all(R[np.indices(R.shape).sum(axis=0) % 2 == 1] == 0)
        assert _rank(R.reshape(4, 4)) == 4
        W = rng.normal(size=(2, 2, 4))             # any two product terms, no symmetry at all
        P = np.einsum("si,sj,sk,sl->ijkl", W[..., 0], W[..., 1], W[..., 2], W[..., 3])
        assert _rank(P.reshape(4, 4)) == 2


def _potts_tensor(q, beta):
    """Site tensor of the q-state Potts model, sum_s W[s, l] W[s, u] W[s, r] W[s, d] with
    W W^T = exp(beta * delta): the Ising construction with a q-valued spin."""
    w, v = np.linalg.eigh(np.exp(beta * np.eye(q)))
    W = v * np.sqrt(w)
    return np.einsum("si,sj,sk,sl->ijkl", W, W, W, W)


def test_untruncated_ranks_are_q_to_the_number_of_bonds_a_cut_crosses():
    # Oracle: each original bond carries a q-valued index, so the rank of a cut is q**b with b
    # the number of bonds (at step 0: the one spin) it crosses; b is geometry, the same for
    # every q.  The Ising tensor (q = 2) and a 3-state Potts tensor must give the same b.
    ising_ranks = [c.rank for c in trg.cut_spectra(ising.initial_tensor(0.3, trg.NUMPY), 5)]
    potts_ranks = [c.rank for c in trg.cut_spectra(_potts_tensor(3, 0.6), 4)]
    bonds_2 = [math.log(r, 2) for r in ising_ranks]
    bonds_3 = [math.log(r, 3) for r in potts_ranks]
    assert all(b == pytest.approx(round(b), abs=1e-12) for b in bonds_2 + bonds_3)
    assert [round(b) for b in bonds_2[:4]] == [round(b) for b in bonds_3]
    assert ising_ranks == [2, 4, 4, 16, 16]
    assert trg.truncation_schedule(16, 5, 0.3) == ising_ranks   # nothing truncated up to step 4
    # a generic parity-even tensor has no such structure: full rank at the first steps
    generic = [c.rank for c in trg.cut_spectra(_parity_even(np.random.default_rng(1)), 3)]
    assert generic == [4, 4, 16]


def test_untruncated_spectra_refuse_a_tensor_that_does_not_fit():
    with pytest.raises(trgad.InputError, match=r"steps=8 is out of range here: step 6 would build"):
        trg.cut_spectra(ising.initial_tensor(0.3, trg.NUMPY), 8)
    with pytest.raises(trgad.InputError, match=r"chi=0 is out of range"):
        trg.cut_spectra(ising.initial_tensor(0.3, trg.NUMPY), 2, chi=0)


@pytest.fixture(scope="module")
def cuts_chi16():
    return trg.cut_spectra(ising.initial_tensor(BETA, trg.NUMPY), 12, chi=16)


def test_cut_spectra_follow_the_schedule_and_the_lattice_symmetry(cuts_chi16):
    assert [c.k for c in cuts_chi16] == SCHEDULE[:12]
    assert all(c.rank >= c.k for c in cuts_chi16)
    for c in cuts_chi16:
        assert c.a[0] == 1.0 and np.all(np.diff(c.a) <= 0)
        manual = min((s[c.k - 1] - s[c.k]) / s[c.k - 1] for s in (c.a, c.b)) if c.k < c.a.size else None
        assert (np.isnan(c.gap) if manual is None else c.gap == manual)
    # the square lattice's 90-degree rotation maps one sublattice's split onto the other's;
    # it holds to rounding until a near-degenerate cut amplifies the rounding (step 7)
    for c in cuts_chi16[:7]:
        assert np.allclose(c.a[:c.k + 1], c.b[:c.k + 1], rtol=1e-9, atol=1e-15)


def test_chi16_cuts_nearly_degenerate_at_steps_7_to_9_but_accepted(cuts_chi16):
    gaps = [c.gap for c in cuts_chi16]
    near = [i for i, g in enumerate(gaps) if g < 1e-4]
    assert near == [7, 8, 9]
    assert gaps[8] < 1e-6
    assert min(gaps) > svdrules.DEGENERATE_RTOL          # the schedule accepted them (no refusal)


def test_schedule_refuses_a_chi_that_cuts_a_multiplet():
    # the book's example; which step cuts the doublet depends on rounding
    # amplified by the near-degenerate cuts at steps 7 to 9 (13 before the site tensor was
    # written in closed form, 14 since)
    with pytest.raises(trgad.InputError, match=r"chi=19 at step 1\d \(beta=0.5\) cuts inside a multiplet of 2"):
        trg.truncation_schedule(19, 20, 0.5)


def test_lnz_terms_match_lnz_per_site_and_exact_tori():
    sched = SCHEDULE[:8]
    terms = trg.lnz_terms(BETA, sched, trg.NUMPY)
    for n in range(1, len(sched) + 1):
        assert terms["estimates"][n - 1] == pytest.approx(
            float(trg.lnz_per_site(BETA, sched[:n], trg.NUMPY)), rel=1e-14)
    for n in range(1, 5):
        assert terms["estimates"][n - 1] == pytest.approx(exact.torus_exact(BETA, n)["lnz_per_site"], rel=1e-12)
    rebuilt = 2 * BETA + sum(ln / 2**i for i, ln in enumerate(terms["ln_norms"])) + terms["ln_traces"][-1] / 2**8
    assert rebuilt == pytest.approx(terms["estimates"][-1], rel=1e-15)


def test_derivatives_at_the_nearly_degenerate_cuts_equal_finite_differences():
    # The terms fed by the cuts at steps 7, 8, 9 (ln||T_8||, ln||T_9||, ln||T_10||), whose
    # kept and discarded values are closest: forward mode through balanced_split against
    # Richardson-extrapolated central differences of the NumPy TRG (no derivative rule
    # involved; error O(h**4) plus the value's rounding noise / h).
    import jax.numpy as jnp

    sched = SCHEDULE[:11]
    f = lambda b: jnp.stack(trg.lnz_terms(b, sched)["ln_norms"])  # noqa: E731
    d = np.asarray(jax.jvp(f, (BETA,), (1.0,))[1])

    def central(h):
        up, down = (np.array(trg.lnz_terms(b, sched, trg.NUMPY)["ln_norms"]) for b in (BETA + h, BETA - h))
        return (up - down) / (2 * h)

    h = 4e-4
    fd = (4 * central(h / 2) - central(h)) / 3
    assert np.allclose(d[:10], fd[:10], rtol=1e-10, atol=0)
    # ln||T_10|| follows the step-8 cut (relative gap 1e-7): rounding in its value is
    # amplified to about 1e-11, which bounds any finite difference at about 1e-11 / h.  One
    # step size's estimate can land ~2e-7 off (with NumPy 2.5's SVD rounding, at h = 4e-4), so the
    # reference is the median of the Richardson estimates over four step sizes
    fd10 = np.median([((4 * central(h / 2) - central(h)) / 3)[10] for h in (2e-4, 4e-4, 8e-4, 1.6e-3)])
    assert d[10] == pytest.approx(fd10, rel=1e-7)
