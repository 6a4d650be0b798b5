"""trgad.caps: the TRGAD_PREVIEW switch is parsed in one place, strictly."""
import os
import subprocess
import sys

import pytest

from trgad import InputError, caps


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "Yes", " on "])
def test_preview_on(value):
    assert caps.parse_preview(value) is True


@pytest.mark.parametrize("value", [None, "", "  ", "0", "false", "False", "NO", "off"])
def test_preview_off(value):
    assert caps.parse_preview(value) is False


@pytest.mark.parametrize("value", ["2", "maybe", "preview", "f"])
def test_preview_unknown_is_a_one_line_error_naming_the_value(value):
    with pytest.raises(InputError) as err:
        caps.parse_preview(value)
    message = str(err.value)
    assert "\n" not in message and repr(value) in message and "TRGAD_PREVIEW" in message


def _import_caps(value):
    env = dict(os.environ, TRGAD_PREVIEW=value)
    code = "from trgad import caps; print(caps.PREVIEW, caps.REPEATS)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_module_reads_the_environment():
    # "False" used to turn preview on (any non-empty value but 0/false/no did)
    on, off = _import_caps("on"), _import_caps("False")
    assert on.stdout.split() == ["True", "1"]
    assert off.stdout.split() == ["False", "3"]
    bad = _import_caps("maybe")
    assert bad.returncode != 0 and "TRGAD_PREVIEW='maybe' is not known" in bad.stderr


def _caps_values(value, names):
    env = dict(os.environ, TRGAD_PREVIEW=value)
    code = ("import json; from trgad import caps; "
            f"print(json.dumps({{n: getattr(caps, n) for n in {names!r}}}))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import json
    return json.loads(r.stdout.strip().splitlines()[-1])


def _size(v):
    return sum(v) + len(v) if isinstance(v, list) else v


def test_preview_caps_of_the_modes_are_smaller():
    names = ["MODES_STEPS", "GROWTH_STEPS", "GROWTH_CAP_SECONDS", "SECOND_STEPS", "PARAMS_STEPS", "C_SCAN_POINTS",
             "C_SCAN_CHIS", "C_SCAN_STEPS", "C_REFINE_POINTS"]
    full, preview = _caps_values("0", names), _caps_values("1", names)
    for n in names:
        assert _size(preview[n]) <= _size(full[n]), n
    assert full["C_SCAN_POINTS"] >= 41 and full["GROWTH_STEPS"] == [10, 20, 40]
    assert full["MODES_STEPS"] == 20 and full["C_SCAN_CHIS"] == [8, 16]
