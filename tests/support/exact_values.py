"""Where tests import `evopolicygym` from: our implementation of it in compat/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def evopolicygym_root() -> Path:
    """The directory to put on sys.path / PYTHONPATH so that `import evopolicygym.policy` works."""
    return REPO / "compat"


def assert_exactly_equal(result: object, expected: object, *, key_order: bool = True) -> None:
    """Equal values of the very same classes, all the way down (1 == 1.0 == True and (1,) vs [1] do not pass); a
    dict's keys in the same order too unless key_order is False."""
    assert type(result) is type(expected), (result, expected)
    if type(expected) in (list, tuple):
        assert isinstance(result, (list, tuple)) and len(result) == len(expected)
        for got, want in zip(result, expected, strict=True):
            assert_exactly_equal(got, want, key_order=key_order)
    elif type(expected) is dict:
        assert isinstance(result, dict)
        assert (list(result) == list(expected)) if key_order else (sorted(result) == sorted(expected))
        for key in expected:
            assert_exactly_equal(result[key], expected[key], key_order=key_order)
    else:
        assert result == expected
