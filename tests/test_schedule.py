"""A truncation schedule is a non-empty sequence of positive integers, checked in one place
(trgad.runtime.validate.check_schedule) by every entry point that takes one."""
import numpy as np
import pytest

import trgad  # noqa: F401  (float64)
from trgad import bench
from trgad.keyed import keyed_trg
from trgad.physics import modes, staged, trg, whole, heat
from trgad.topics import nesting, params
from trgad.runtime import validate
from trgad.runtime.validate import InputError

BETA = 0.3


@pytest.mark.parametrize("schedule,expected", [
    ([2, 4, 4], [2, 4, 4]),
    ((2,), [2]),
    (np.array([2, 4]), [2, 4]),
    ([np.int64(3), np.int32(2)], [3, 2]),
    (range(1, 3), [1, 2]),
])
def test_good_schedules_come_back_as_python_ints(schedule, expected):
    out = validate.check_schedule(schedule)
    assert out == expected and all(type(k) is int for k in out)


@pytest.mark.parametrize("schedule,needle", [
    ([2.5], "schedule=[2.5] is out of range"),
    ([2.0], "schedule=[2.0] is out of range"),       # a float, even a whole one, is not a k
    (["2"], "schedule=['2'] is out of range"),
    ([2, True], "schedule=[2, True] is out of range"),
    ([2, 0], "schedule=[2, 0] is out of range"),
    ([-1], "schedule=[-1] is out of range"),
    ([np.float64(2.0)], "is out of range"),
    ([], "schedule=[] is out of range"),
    ((), "schedule=() is out of range"),
    (5, "schedule=5 is not a sequence"),
    ("24", "schedule='24' is not a sequence"),
    (None, "schedule=None is not a sequence"),
])
def test_bad_schedules_are_one_line_errors_naming_them(schedule, needle):
    with pytest.raises(InputError) as info:
        validate.check_schedule(schedule)
    message = str(info.value)
    assert needle in message and "\n" not in message


ENTRY_POINTS = {
    "trg.lnz_per_site": lambda s: trg.lnz_per_site(BETA, s),
    "trg.lnz_terms": lambda s: trg.lnz_terms(BETA, s),
    "whole.lnz_fn": whole.lnz_fn,
    "whole.value_and_grad": lambda s: whole.value_and_grad(BETA, s),
    "whole.specific_heat_autodiff": lambda s: whole.specific_heat_autodiff(BETA, s),
    "staged.value_and_grad_jax": lambda s: staged.value_and_grad_jax(BETA, s),
    "staged.value_grad_hess_jax": lambda s: staged.value_grad_hess_jax(BETA, s),
    "heat.specific_heat": lambda s: heat.specific_heat(BETA, s),
    "heat.specific_heat_exact": lambda s: heat.specific_heat_exact(BETA, s),
    "staged.step_residuals": lambda s: staged.step_residuals(BETA, s),
    "staged.full_size_steps": staged.full_size_steps,
    "modes.value_and_derivatives": lambda s: modes.value_and_derivatives(BETA, s, "whole"),
    "modes.program": lambda s: modes.program("whole", 1, s),
    "modes.scan_start": modes.scan_start,
    "modes.lnz_scanned": lambda s: modes.lnz_scanned(BETA, s, checkpoint=True),
    "nesting.taylor_mode_works": nesting.taylor_mode_works,
    "params.gradient": lambda s: params.gradient(BETA, s),
    "params.lnz_of_tensor": lambda s: params.lnz_of_tensor(np.ones((2, 2, 2, 2)), s),
    "keyed_trg.trg_whole": lambda s: keyed_trg.trg_whole(BETA, s),
    "keyed_trg.value_and_grad_engine": lambda s: keyed_trg.value_and_grad_engine(BETA, s),
    "keyed_trg.specific_heat": lambda s: keyed_trg.specific_heat(BETA, s),
    "bench.methods": lambda s: bench.methods(BETA, s, repeats=1),
    "bench.engine_rows": lambda s: bench.engine_rows(BETA, s, repeats=1),
    "bench.staged_residual_bytes": lambda s: bench.staged_residual_bytes(BETA, s),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("schedule", [[2.5], ["2"], []])
def test_every_entry_point_refuses_a_bad_schedule(name, schedule):
    # issue 16's instance: [2.5] ran silently as [2] and ['2'] was accepted
    with pytest.raises(InputError, match=r"^schedule="):
        ENTRY_POINTS[name](schedule)
