"""One point of parameter values, ``p=4096,size=30``: what ``--at`` and ``--point`` read."""

from __future__ import annotations

import pytest

from perfcast.errors import InputError
from perfcast.experiment.points import format_point, parse_point


def test_a_point_is_one_value_per_parameter_separated_by_commas():
    point = parse_point(" p=4096, size = 30.5 ,", "--at", ["p", "size"])
    assert point == {"p": 4096, "size": 30.5}
    assert isinstance(point["p"], int)  # written into a run command as 4, not 4.0
    assert parse_point("", "--at", ["p"]) == {}


def test_format_point_is_read_back_by_parse_point():
    point = {"p": 2, "size": 16.0, "eps": 0.25}
    assert format_point(point) == "p=2, size=16, eps=0.25"
    assert parse_point(format_point(point), "--point") == point


@pytest.mark.parametrize(
    ("text", "parameters", "message"),
    [
        ("n:4", None, r"--x 'n:4': expected NAME=VALUE\[,NAME=VALUE\.\.\.\], got 'n:4'"),
        ("=4", None, "expected NAME=VALUE"),
        ("q=4", ["p", "size"], r"'q=4' is not NAME=VALUE over the parameters p, size \(e\.g\."),
        ("p=4", [], "--x needs parameters, and the models have none"),
        ("p=many", None, "--x 'p=many': 'many' is not a number"),
        ("p=nan", None, "p = nan is not a finite number"),
        ("p=inf", ["p"], "p = inf is not a finite number"),
        ("p=2,p=4", None, "'p' is given twice"),
    ],
)
def test_a_bad_point_names_the_flag_and_the_item(text, parameters, message):
    with pytest.raises(InputError, match=message):
        parse_point(text, "--x", parameters)
