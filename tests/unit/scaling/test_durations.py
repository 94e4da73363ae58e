import pytest

from inferscale.scaling.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("1h30m", 5400.0), ("1.5s", 1.5), ("0s", 0.0)],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5x", "-5s", "s", "5 s", "5s5", "1e3s", "ms"])
def test_parse_rejects_with_the_accepted_form(text: str) -> None:
    with pytest.raises(ValueError, match="use a number with a unit"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4123, "412ms"),
        (95, "1m35s"),
        (45, "45s"),
        (2.5, "2.5s"),
        (420, "7m"),
        (5400, "1h30m"),
        (0, "0ms"),
        (0.0001, "0.1ms"),
        (0.00004567, "0.046ms"),
        (1e-9, "0.000001ms"),
    ],
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_format_round_trips_through_parse() -> None:
    for seconds in (1e-9, 0.0001, 0.00049, 0.05, 0.5, 3.0, 61.0, 3600.0, 5430.0):
        assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, rel=0.01)
