"""trgad.pages.caps: the TRGAD_PREVIEW switch is parsed in one place, strictly."""

import pytest

from trgad import InputError
from trgad.pages import caps


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


@pytest.fixture
def reimport(monkeypatch):
    """Import trgad.pages.caps afresh under TRGAD_PREVIEW=value (in this process: the module reads
    the environment when it is imported); the module is put back afterwards."""
    import importlib

    def run(value):
        monkeypatch.setenv("TRGAD_PREVIEW", value)
        return importlib.reload(caps)

    yield run
    monkeypatch.delenv("TRGAD_PREVIEW", raising=False)
    importlib.reload(caps)


def test_module_reads_the_environment(reimport):
    # "False" used to turn preview on (any non-empty value but 0/false/no did)
    on = reimport("on")
    assert (on.PREVIEW, on.REPEATS) == (True, 1)
    off = reimport("False")
    assert (off.PREVIEW, off.REPEATS) == (False, 3)
    with pytest.raises(InputError, match="TRGAD_PREVIEW='maybe' is not known"):
        reimport("maybe")


def _caps_values(reimport, value, names):
    module = reimport(value)
    return {n: list(v) if isinstance(v, tuple) else v for n in names for v in [getattr(module, n)]}


def _size(v):
    return sum(v) + len(v) if isinstance(v, list) else v


def test_preview_caps_of_the_modes_are_smaller(reimport):
    names = ["MODES_STEPS", "GROWTH_STEPS", "SECOND_STEPS", "PARAMS_STEPS"]
    full, preview = _caps_values(reimport, "0", names), _caps_values(reimport, "1", names)
    for n in names:
        assert _size(preview[n]) <= _size(full[n]), n
    assert full["GROWTH_STEPS"] == [10, 20, 40] and full["MODES_STEPS"] == 20
