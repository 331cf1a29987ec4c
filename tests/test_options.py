"""Modeler options declared once: constructor checks, get/set_params, flags, docstrings."""

from __future__ import annotations

import inspect
from dataclasses import fields
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from perfcast.cli import EFFORT, RANKS_OPTION, build_parser, main
from perfcast.cli.model import search_modeler
from perfcast.effort import EffortModeler
from perfcast.effort.counts import CountModeler
from perfcast.errors import InputError
from perfcast.experiment import Experiment
from perfcast.modeling import PMNFModeler, SearchSpace
from perfcast.modeling.options import OptionError, declared_options, from_arguments

MODELERS = (PMNFModeler, CountModeler, EffortModeler)


def parse_model(*flags: str):
    """``perfcast model m.txt FLAGS`` as parsed arguments (nothing is read)."""
    return build_parser("model").parse_args(["model", "m.txt", *flags])


@pytest.mark.parametrize("modeler", MODELERS)
def test_params_are_exactly_the_constructor_parameters(modeler):
    constructor = [name for name in inspect.signature(modeler).parameters]
    assert list(modeler().get_params(deep=False)) == constructor
    assert [declared.name for declared, _ in declared_options(modeler)] == constructor


@pytest.mark.parametrize("modeler", [*MODELERS, SearchSpace])
def test_every_option_is_in_the_class_docstring(modeler):
    args = modeler.__doc__.split("\n    Args:\n", 1)[1]
    for declared in fields(modeler):
        if declared.init and declared.name != "_":
            assert f"\n        {declared.name}: " in f"\n{args}", declared.name


def test_set_params_changes_in_place_and_returns_the_modeler():
    modeler = PMNFModeler()
    assert modeler.set_params(terms=2, aggregation="mean") is modeler
    assert (modeler.terms, modeler.aggregation) == (2, "mean")


def test_an_invalid_set_params_changes_nothing():
    modeler = PMNFModeler(candidates=3)
    with pytest.raises(OptionError, match="candidates must be at least 1, not 0"):
        modeler.set_params(terms=2, candidates=0)
    assert (modeler.terms, modeler.candidates) == (1, 3)


def test_nested_options_change_a_copy_of_the_nested_object():
    space = SearchSpace.from_strings("0,1,2", "0")
    modeler = PMNFModeler(space)
    assert modeler.get_params()["space__exponents"] == (0, 1, 2)
    changed = modeler.with_params(space__exponents=(Fraction(1, 2), 1))
    assert changed.space.exponents == (Fraction(1, 2), 1) and changed.space.log_exponents == (0,)
    assert modeler.space is space and space.exponents == (0, 1, 2)
    effort = EffortModeler().set_params(modeler__terms=2)
    assert effort.get_params()["modeler__terms"] == 2


def test_an_option_of_a_nested_object_is_named_by_its_path():
    with pytest.raises(OptionError, match=r"^space__exponents: 17 is beyond") as error:
        PMNFModeler().with_params(space__exponents=(0, 17))
    assert error.value.option == "space__exponents"


def test_unknown_options_are_named():
    with pytest.raises(InputError, match=r"PMNFModeler has no option 'term'; its options: "):
        PMNFModeler().with_params(term=2)
    misspelt: dict[str, Any] = {"term": 2}
    with pytest.raises(TypeError):  # Python's own check of keyword arguments
        PMNFModeler(**misspelt)


@pytest.mark.parametrize(
    ("modeler", "options", "words"),
    [
        (PMNFModeler, {"terms": 1.5}, "terms must be an integer, not 1.5"),
        (PMNFModeler, {"terms": True}, "terms must be an integer, not True"),
        (PMNFModeler, {"parsimony": float("nan")}, "parsimony must be at least 0, not nan"),
        (PMNFModeler, {"significance": 1.0}, "significance must be from 0 to below 1, not 1.0"),
        (PMNFModeler, {"max_terms": 0}, "max_terms must be at least 1, not 0"),
        (PMNFModeler, {"weighting": "l1"}, "unknown weighting 'l1'; choose one of relative, none"),
        (PMNFModeler, {"space": None}, "space must be a SearchSpace, not None"),
        (PMNFModeler, {"terms": 4}, "terms 4: 455126 combinations of the 59 shapes"),
        (CountModeler, {"max_columns": 1}, "max_columns must be at least 2, not 1"),
        (CountModeler, {"term_gain": 0.5}, "term_gain must be at least 1, not 0.5"),
        (EffortModeler, {"modeler": CountModeler()}, "modeler must be a PMNFModeler"),
        (EffortModeler, {"aggregation": "mode"}, "unknown aggregation 'mode'"),
        (SearchSpace, {"log_exponents": (0.5,)}, "log_exponents must be non-negative integers"),
        (SearchSpace, {"exponents": (0,), "log_exponents": (0,)},
         "exponents: the search space has no shape but the constant"),
    ],
)  # fmt: skip
def test_the_library_refuses_bad_values_naming_the_option(modeler, options, words):
    with pytest.raises(OptionError) as error:
        modeler(**options)
    assert str(error.value).startswith(words), str(error.value)


@pytest.mark.parametrize(
    ("flags", "library", "message"),
    [
        (["--terms", "50"], {"terms": 50}, "--terms 50: 12565671261 combinations"),
        (["--candidates", "0"], {"candidates": 0}, "--candidates must be at least 1, not 0"),
        (["--significance", "-1"], {"significance": -1.0}, "--significance must be from 0 to"),
        (["--exponents", "0,20"], {"space__exponents": (0, 20)}, "--exponents: 20 is beyond"),
    ],
)  # fmt: skip
def test_the_command_line_refuses_what_the_library_refuses_naming_the_flag(flags, library, message):
    with pytest.raises(OptionError) as refused:
        PMNFModeler().with_params(**library)
    with pytest.raises(InputError) as error:
        search_modeler(parse_model(*flags))
    assert str(error.value).startswith(message), str(error.value)
    option, flag = refused.value.option, flags[0]
    assert str(error.value) == str(refused.value).replace(option, flag, 1)


def test_unparsable_exponents_name_their_flag():
    with pytest.raises(InputError, match=r"^--log-exponents: cannot parse exponent list 'x'"):
        search_modeler(parse_model("--log-exponents", "x"))


def test_the_flags_defaults_are_the_modelers_defaults():
    assert search_modeler(parse_model()).get_params() == PMNFModeler().get_params()


def test_each_flag_sets_its_option():
    modeler = search_modeler(
        parse_model(
            "--exponents=-1,0,1", "--log-exponents", "0", "--terms", "2", "--criterion", "rss",
            "--aggregate", "mean", "--median-estimator", "sample", "--candidates", "3",
            "--significance", "0", "--allow-negative-terms", "--unweighted", "--scaling", "weak",
        )
    )  # fmt: skip
    expected = PMNFModeler(
        SearchSpace.from_strings("-1,0,1", "0"),
        terms=2,
        criterion="rss",
        aggregation="mean",
        median_estimator="sample",
        candidates=3,
        significance=0.0,
        positive_terms=False,
        weighting="none",
        beyond_space=False,
    )
    assert modeler.get_params() == expected.get_params()


def test_help_shows_each_flag_with_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["model", "--help"])
    text = capsys.readouterr().out
    for words in (
        "--exponents EXPONENTS",
        "--log-exponents LOG_EXPONENTS",
        "terms per parameter (default 1)",
        "--aggregate {median,mean,min,max}",
        "shapes kept per parameter (default 5)",
        "0 disables it (default 0.001)",
        "--unweighted ",
    ):
        assert words in " ".join(text.split()), words


def test_model_and_report_take_one_ranks_parameter_flag(capsys):
    """--ranks-parameter is the effort modeler's ``ranks`` option in both commands, declared
    once: the same help and default, and in report it sets the option as in model."""
    shown = []
    for command in ("model", "report"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        start = text.index("--ranks-parameter RANKS_PARAMETER the parameter")
        shown.append(text[start : text.index("(default p)", start)])
    assert shown[0] == shown[1]
    argv = ["report", "s.sqlite", "-o", "s.html", "--ranks-parameter", "np"]
    args = build_parser("report").parse_args(argv)
    effort = from_arguments(
        EffortModeler, args, dest_prefix=EFFORT, nested=False, only=RANKS_OPTION
    )
    assert effort.ranks == "np"


def test_significance_zero_and_none_both_skip_the_noise_test():
    rng = np.random.default_rng(0)
    rows = [  # a slight growth under 20 % noise: the F-test at 0.001 does not see it
        ("f", "time", (p,), 10 * (1 + 0.2 * rng.uniform(-1, 1)) + 0.08 * p)
        for p in (2, 4, 8, 16, 32)
        for _ in range(5)
    ]
    data = Experiment.from_rows(["p"], rows)
    tested = PMNFModeler().fit(data)[("f", "time")]
    assert not tested.terms
    untested = [PMNFModeler(significance=s).fit(data)[("f", "time")] for s in (0, None)]
    assert untested[0].terms and untested[0].to_json() == untested[1].to_json()


def test_effort_aggregation_none_follows_the_time_modeler_it_has_now():
    effort = EffortModeler(aggregation=None)
    assert effort.coefficient_aggregation == "median"
    effort.set_params(modeler=PMNFModeler(aggregation="mean"))
    assert effort.aggregation is None and effort.coefficient_aggregation == "mean"
