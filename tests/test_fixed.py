"""The library fixed: computegraph 0.1.0 patched at build time (tenferro-harness/fixed/), its
preparation strict, its lock the stock one's, and tenferro-rs 0.8.0 built against it
(``trgad-tenferro-fixed``) giving the stock build's gradients bit for bit, JAX's at 20 steps,
and key comparisons that grow linearly.

The program is built by README's install; without it the tests that run it fail (in CI) or
skip.  computegraph's own published tests, run on the patched crate, are in the slow tier."""
import hashlib
import importlib.util
import os
import tomllib
from pathlib import Path

import pytest

import trgad  # noqa: F401
from trgad.harness import tenferro

from conftest import assert_error

HARNESS = Path(__file__).resolve().parent.parent / "tenferro-harness"
_spec = importlib.util.spec_from_file_location("trgad_fixed_prepare", HARNESS / "fixed" / "prepare.py")
prepare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prepare)

BETA, CHI = 0.3, 16


def _needs_program():
    if not tenferro.available(build="fixed"):
        if os.environ.get("CI"):
            raise RuntimeError("trgad-tenferro-fixed is not installed: pip install -r requirements.txt builds it")
        pytest.skip("trgad-tenferro-fixed is not installed (pip install -r requirements.txt)")


def _packages(path):
    return {(p["name"], p["version"]): p for p in tomllib.loads(path.read_text())["package"]}


def test_fixed_lock_is_the_stock_lock_but_computegraph():
    stock, fixed = _packages(HARNESS / "Cargo.lock"), _packages(HARNESS / "fixed" / "Cargo.lock")
    stock.pop(("trgad-tenferro", "0.1.0"))
    root = fixed.pop(("trgad-tenferro-fixed", "0.1.0"))
    assert root["dependencies"] and set(stock) == set(fixed)
    cg = ("computegraph", "0.1.0")
    assert "checksum" in stock[cg] and "source" not in fixed[cg] and "checksum" not in fixed[cg]
    for key in stock:
        if key != cg:
            assert stock[key] == fixed[key], key
    assert {k: v for k, v in stock[cg].items() if k not in ("source", "checksum")} == fixed[cg]


def test_diff_touches_only_computegraphs_types_and_manifest():
    text = prepare.DIFF.read_text()
    files = [line.split()[1] for line in text.splitlines() if line.startswith("--- ")]
    assert files == ["a/Cargo.toml", "a/src/types.rs"]
    added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert not any("unsafe" in line for line in added)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """prepare.py writing into ``tmp_path`` instead of tenferro-harness/build/."""
    monkeypatch.setattr(prepare, "PREPARED", tmp_path / "computegraph-fixed")
    return tmp_path


def test_prepare_refuses_a_crate_whose_checksum_differs(scratch, monkeypatch):
    monkeypatch.setattr(prepare, "_checksum", lambda: "0" * 64)
    with pytest.raises(prepare.PrepareError) as e:
        prepare.prepare()
    message = str(e.value)
    assert "\n" not in message and "computegraph-0.1.0.crate" in message and "0" * 64 in message
    assert not prepare.PREPARED.exists()


def test_prepare_refuses_a_diff_whose_context_does_not_match(scratch, monkeypatch):
    text = prepare.DIFF.read_text()
    context = " use std::collections::hash_map::DefaultHasher;"
    assert context in text
    bad = scratch / "computegraph.diff"
    bad.write_text(text.replace(context, " use std::collections::hash_map::RandomState;", 1))
    monkeypatch.setattr(prepare, "DIFF", bad)
    with pytest.raises(prepare.PrepareError) as e:
        prepare.prepare()
    message = str(e.value)
    assert "\n" not in message and str(bad) in message and "does not apply" in message
    assert not prepare.PREPARED.exists()


def test_prepare_stamps_the_diff_it_applied(scratch):
    out = prepare.prepare()
    assert out == prepare.PREPARED
    stamp = (out / ".trgad-diff-sha256").read_text()
    assert stamp == hashlib.sha256(prepare.DIFF.read_bytes()).hexdigest()
    assert "fn same(" in (out / "src" / "types.rs").read_text()
    assert 'rust-version = "1.70"' in (out / "Cargo.toml").read_text()


@pytest.mark.parametrize("args,needle", [
    (["whole", "--steps", "2", "--build", "banana"], "build 'banana' is not one of stock, fixed"),
    (["whole", "--steps", "2", "--build", "fixed", "--release", "0.9.0"], "release 0.9.0 has none"),
    (["chain", "--depth", "3", "--build", ""], "build '' is not one of"),
    (["count", "--graph", "chain", "--depth", "3", "--build", "Fixed"], "build 'Fixed'")])
def test_cli_refuses_a_bad_build_in_one_line(cli, args, needle):
    assert_error(cli("tenferro", *args), 2, needle)


@pytest.fixture(scope="module")
def both_builds():
    """Whole-graph ad.grad at 1 to 4 steps, stock and fixed."""
    _needs_program()
    return {(n, b): tenferro.whole(n, BETA, CHI, build=b) for n in (1, 2, 3, 4) for b in tenferro.BUILDS}


def test_fixed_gradients_are_the_stock_ones_bit_for_bit(both_builds):
    for n in (1, 2, 3, 4):
        stock, fixed = both_builds[n, "stock"], both_builds[n, "fixed"]
        assert stock["returned"] and fixed["returned"]
        for key in ("grad", "lnz_per_site", "grad_ops", "schedule"):
            assert fixed[key] == stock[key], (n, key)


def test_fixed_transform_does_not_grow_many_fold_per_step(both_builds):
    stock = {n: both_builds[n, "stock"]["transform_ms"] for n in (3, 4)}
    fixed = {n: both_builds[n, "fixed"]["transform_ms"] for n in (3, 4)}
    assert stock[4] / stock[3] > 4, stock
    assert fixed[4] < stock[4] / 20, (fixed, stock)


@pytest.mark.slow
def test_computegraphs_own_tests_pass_with_the_patch():
    """computegraph's published test suite (29 tests and 4 doctests in 0.1.0) and the patch's
    own counted tests, run from the prepared crate with its published Cargo.lock."""
    from trgad.harness import patched

    out = patched.suite()
    assert out["failed"] == 0 and out["passed"] >= 29 + 4 + 6, out
    assert "types::tests::equal_copies_walk_each_level_once" in out["ours"], out
    assert "types::tests::classes_formed_apart_are_joined" in out["ours"], out
    assert len(out["ours"]) == 6, out
