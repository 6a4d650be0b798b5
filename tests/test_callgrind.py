"""Exact call counts inside tenferro-rs (trgad.harness.callgrind, trgad.harness.tenferro.count): the reader
of callgrind's files on a file written by hand, then the library's own counts of its key
equality, asserted exactly in their closed forms in the depth of the mul chain.

The closed forms were read off the counts of tenferro-rs 0.8.0 built by this harness
(rustc 1.95, release profile): n(D+1) - K n(D) moves by the same amount every layer, so
n(D) = A K^D + B D + C, and three depths fix A, B, C; the tests check every other depth."""
import os
import shutil

import pytest

from trgad.harness import callgrind, tenferro
from trgad.runtime.validate import InputError

HAND_WRITTEN = """\
# callgrind format
version: 1
events: Ir
fn=(1) main
0 5
cfn=(2) eq
calls=3 0
0 30
cfn=(3) lookup
calls=1 0
0 12
fn=(3)
0 2
cfn=(2)
calls=2 0
0 10
fn=(4) eq'2
0 4
cfn=(4)
calls=7 0
0 7
fn=(2)
0 1
cfn=(4)
calls=5 0
0 9
"""


def test_reader_counts_calls_by_caller_and_recursion(tmp_path):
    path = tmp_path / "callgrind.out"
    path.write_text(HAND_WRITTEN)
    counts = callgrind.call_counts(path)
    assert counts[("main", "eq")] == 3 and counts[("lookup", "eq")] == 2
    assert counts[("eq'2", "eq'2")] == 7 and counts[("eq", "eq'2")] == 5
    outside, recursive, callers = callgrind.calls_to(counts, "eq")
    assert (outside, recursive, callers) == (5, 12, [("main", 3), ("lookup", 2)])


def test_reader_names_an_undefined_name(tmp_path):
    path = tmp_path / "bad.out"
    path.write_text("fn=(1) main\ncfn=(9)\ncalls=1 0\n")
    with pytest.raises(ValueError, match=r"bad.out:2: name \(9\)"):
        callgrind.call_counts(path)


def test_count_refuses_bad_input_in_one_line():
    with pytest.raises(InputError, match="graph"):
        tenferro.count("tree", depth=3)
    with pytest.raises(InputError, match="depth"):
        tenferro.count("chain", depth=0)
    with pytest.raises(InputError, match="0.7.0"):
        tenferro.count("chain", depth=3, version="0.7.0")
    with pytest.raises(InputError, match="graph must be 'trg'"):
        tenferro.count("chain", depth=3, eager=True)


def test_count_says_valgrind_is_missing(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(tenferro.TenferroError, match="needs valgrind"):
        tenferro._valgrind()


needs_harness = pytest.mark.skipif(
    not (tenferro.available() and tenferro.available(tenferro.NEWEST) and shutil.which("valgrind"))
    and not os.environ.get("CI"),
    reason="needs the harness (pip install -r requirements.txt) and valgrind")


def closed_form(K, A, B, C):
    return lambda D: A * K ** D + B * D + C


@needs_harness
def test_chain_counts_small_depths_are_exact():
    """Fan-out 2, depths 2-4: the walk in ad.grad, its registry share, and the drop's."""
    rows = {D: tenferro.count("chain", depth=D, fanout=2) for D in (2, 3, 4)}
    for D, r in rows.items():
        assert r["eq_nested_transform"] == closed_form(2, 8, 6, -12)(D), D
        assert r["eq_nested_registry"] == closed_form(2, 8, -8, -6)(D), D
        assert r["eq_nested_drop"] == closed_form(2, 8, -6, -6)(D), D
        assert r["eq_calls_transform"] > r["eq_nested_transform"] and r["eq_calls_drop"] > r["eq_nested_drop"]
        assert [name for name, _ in r["callers_drop"]] == [
            "<tenferro_ops::ad::context::GlobalMetadataScope as core::ops::drop::Drop>::drop"]


@pytest.mark.slow
@needs_harness
def test_chain_counts_are_exact_closed_forms():
    for K, depths, transform, drop in ((2, range(2, 11), (8, 6, -12), (8, -6, -6)),
                                       (3, range(2, 8), (6, 14, -16), (6, -8, -4))):
        for D in depths:
            r = tenferro.count("chain", depth=D, fanout=K)
            assert r["eq_nested_transform"] == closed_form(K, *transform)(D), (K, D)
            assert r["eq_nested_drop"] == closed_form(K, *drop)(D), (K, D)


@pytest.mark.slow
@needs_harness
def test_trg_counts_grow_by_the_paths_per_step():
    """16 paths per TRG step (2 through the normalisation x 4 halves x 2 SVD outputs): the
    count of the walk grows by 16 per step to within 1 %, in ad.grad and in the drop."""
    n = {s: tenferro.count("trg", steps=s) for s in (1, 2, 3)}
    for key in ("eq_nested_transform", "eq_nested_drop"):
        assert n[3][key] / n[2][key] == pytest.approx(16, rel=0.01), key
        assert n[2][key] / n[1][key] > 10, key


@pytest.mark.slow
@needs_harness
def test_eager_backward_walks_as_grad_and_drop_together():
    """tenferro-rs's eager backward() runs the transform and frees its graph: its walk is
    ad.grad's plus the drop's, to within 1 % (a few dozen lookups differ), at 1 to 3 TRG
    steps, so it grows by the same 16 per step (0.8.0: 21,667 / 359,271 / 5,765,093 calls)."""
    for s in (1, 2, 3):
        eager, whole = tenferro.count("trg", steps=s, eager=True), tenferro.count("trg", steps=s)
        assert set(eager) >= {"eq_calls_backward", "eq_nested_backward", "callers_backward"}
        assert "eq_nested_transform" not in eager and eager["args"][-1] == "--eager"
        both = whole["eq_nested_transform"] + whole["eq_nested_drop"]
        assert tenferro.walk(eager, "backward") == pytest.approx(both, rel=1e-2), s


@pytest.mark.slow
@needs_harness
def test_newest_release_walks_exactly_as_the_report_version():
    """tenferro-rs NEWEST (0.9.0) makes the same calls as 0.8.0 at the depths the book shows."""
    from trgad.pages import caps
    for D in caps.COUNT_CHAIN_DEPTHS[2]:
        old = tenferro.count("chain", depth=D, fanout=2)
        new = tenferro.count("chain", depth=D, fanout=2, version=tenferro.NEWEST)
        assert new["eq_nested_transform"] == old["eq_nested_transform"], D
        assert new["eq_nested_drop"] == old["eq_nested_drop"], D


@pytest.mark.slow
@needs_harness
def test_newest_release_walks_the_trg_as_the_report_version():
    old = tenferro.count("trg", steps=3)
    new = tenferro.count("trg", steps=3, version=tenferro.NEWEST)
    assert new["eq_nested_transform"] == old["eq_nested_transform"]
