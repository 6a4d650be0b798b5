"""svd.balanced_split_reverse: the closed-form pullback equals the transposed forward rule."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trgad.physics import svd
from trgad.runtime.validate import InputError


def _vjps(M, k, Xb, Yb):
    ref = jax.vjp(lambda x: svd.balanced_split(x, k), M)[1]((Xb, Yb))[0]
    got = jax.vjp(lambda x: svd.balanced_split_reverse(x, k), M)[1]((Xb, Yb))[0]
    return np.asarray(ref), np.asarray(got)


# each shape compiles its own programs: the quick tier a square truncated and a square
# untruncated case, the slow tier the rectangular ones and 16 x 16 truncated as well
SLOW = pytest.mark.slow


@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e150])
@pytest.mark.parametrize("m,n,k", [(6, 6, 3), pytest.param(8, 5, 2, marks=SLOW), pytest.param(5, 8, 4, marks=SLOW),
                                   (16, 16, 16), pytest.param(16, 16, 5, marks=SLOW),
                                   pytest.param(8, 5, 5, marks=SLOW), pytest.param(5, 8, 5, marks=SLOW)])
def test_pullback_is_the_transpose_of_the_tangent_rule(m, n, k, scale):
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    M = jnp.asarray(rng.standard_normal((m, n))) * scale
    Xb, Yb = jnp.asarray(rng.standard_normal((m, k))), jnp.asarray(rng.standard_normal((k, n)))
    ref, got = _vjps(M, k, Xb, Yb)
    assert np.max(np.abs(got - ref)) <= 1e-12 * np.max(np.abs(ref))


def test_same_halves_as_balanced_split():
    M = jnp.asarray(np.random.default_rng(1).standard_normal((7, 9)))
    for a, b in zip(svd.balanced_split(M, 3), svd.balanced_split_reverse(M, 3)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_degenerate_kept_values_gauge_invariant_loss_matches_finite_differences():
    # M = O1 diag(2, 1, 1, 0.5, 0.1, 0) O2^T: a kept pair of equal values, k = 4
    rng = np.random.default_rng(2)
    O1, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    O2, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    M0 = O1 @ np.diag([2.0, 1.0, 1.0, 0.5, 0.1, 0.0]) @ O2.T
    dM = rng.standard_normal((6, 6))
    C = rng.standard_normal((6, 6))

    def loss(M, split):      # X Y is the truncated matrix: invariant under the bond gauge
        X, Y = split(M, 4)
        return jnp.sum(C * (X @ Y)) + jnp.sum((X.T @ X) ** 2)

    g = jax.grad(lambda M: loss(M, svd.balanced_split_reverse))(jnp.asarray(M0))
    h = 1e-6
    fd = (loss(jnp.asarray(M0 + h * dM), svd.balanced_split) -
          loss(jnp.asarray(M0 - h * dM), svd.balanced_split)) / (2 * h)
    assert abs(float(jnp.sum(g * dM)) - float(fd)) < 1e-7 * abs(float(fd))


def test_forward_mode_and_second_derivatives_refuse():
    M = jnp.asarray(np.random.default_rng(3).standard_normal((5, 5)))
    f = lambda M: jnp.sum(svd.balanced_split_reverse(M, 2)[0] ** 2)     # noqa: E731
    with pytest.raises(TypeError):
        jax.jvp(f, (M,), (M,))
    with pytest.raises(InputError, match="first derivatives only"):
        jax.hessian(f)(M)


def test_bad_k_and_kept_zero_are_refused():
    M = jnp.asarray(np.diag([1.0, 0.5, 0.0]))
    with pytest.raises(InputError, match="k=4 is out of range"):
        svd.balanced_split_reverse(M, 4)
    with pytest.raises(InputError, match="zero singular value"):
        svd.balanced_split_reverse(M, 3)
