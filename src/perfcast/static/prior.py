"""Static count formulas as modeler priors: a fixed term structure, coefficients fitted.

The static model knows *which* terms an instruction count has (``n^3``, ``n^2``, ``n``);
time is not instructions, but for compute-bound code it follows the same terms, so the
modeler only has to fit their coefficients, like with the effort counters.
:class:`StaticSource` is the static model as a prior source of the composition
(:mod:`perfcast.priors`, ``perfcast model --priors static --static model.json``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import split_callpath
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import TIME_METRIC, VISITS_METRIC
from perfcast.experiment.names import function_name, name_list
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.pmnf import Factor, Model
from perfcast.modeling.prior import DerivedPriors, Prior, TermShape
from perfcast.static.formulas import Poly
from perfcast.static.summary import StaticSummary, read_static_summary

SOURCE = "static"


def prior_from_formula(
    formula: Poly,
    rename: Mapping[str, str] | None = None,
    visits: Sequence[Mapping[str, Fraction]] = (),
) -> Prior:
    """A fixed-structure prior with one term per non-constant monomial of ``formula``.

    Args:
        formula: a count formula of the static model (its terms' coefficients are dropped).
        rename: model parameter -> experiment parameter (``{"n": "size"}``); parameters
            not named keep their name. Two names may stand for one parameter
            (``cols=size,rows=size``): their powers add (``cols * rows`` -> ``size^2``).
        visits: the terms of the call path's visits as parameter -> power (the constant
            as ``{}``),
            where it is called more than once per run: the formula counts one call, the
            measured time covers all of them, so each formula term is multiplied by each
            visits term (``iterations * size^2``). Empty: the formula stands as it is.
    """
    rename = dict(rename or {})
    per_call = [_renamed(monomial, rename) for monomial in formula.terms]
    shapes = {_shape(_times(term, visit)) for term in per_call for visit in (visits or [{}])}
    shapes.discard(())  # the constant is always fitted
    if not shapes:
        return Prior.constant(SOURCE)
    return Prior.fixed(SOURCE, sorted(shapes))


def _renamed(monomial: Iterable[tuple[str, int]], rename: Mapping[str, str]) -> dict[str, Fraction]:
    """A monomial's powers per experiment parameter: names renamed to one parameter add."""
    powers: dict[str, Fraction] = {}
    for name, power in monomial:
        parameter = rename.get(name, name)
        powers[parameter] = powers.get(parameter, Fraction(0)) + power
    return powers


def _times(powers: dict[str, Fraction], shape: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """A monomial's powers times a visits shape's (logarithms are not counted: visits of
    a call path are products of loop trip counts)."""
    product = dict(powers)
    for name, power in shape.items():
        product[name] = product.get(name, Fraction(0)) + power
    return product


def _shape(powers: Mapping[str, Fraction]) -> TermShape:
    return tuple(Factor(name, power) for name, power in sorted(powers.items()) if power != 0)


def prior_from_summary(
    summary: StaticSummary,
    function: str,
    metric: str = "instructions",
    rename: Mapping[str, str] | None = None,
) -> Prior:
    """Prior for one model function of a static model's summary.

    ``metric`` is ``instructions``, ``fp_instructions`` or a category name."""
    return prior_from_formula(summary.function(function).formula(metric), rename)


def parse_rename(text: str, flag: str = "rename") -> dict[str, str]:
    """``cols=size,rows=size`` as {static model name: measured parameter}; an InputError
    naming ``flag`` for anything else."""
    rename: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, parameter = item.partition("=")
        name, parameter = name.strip(), parameter.strip()
        if not (name.isidentifier() and parameter.isidentifier()):
            raise InputError(f"{flag}: {item!r} is not NAME=PARAMETER (e.g. cols=size,rows=size)")
        if rename.get(name, parameter) != parameter:
            raise InputError(f"{flag}: {name} is renamed twice ({rename[name]}, {parameter})")
        rename[name] = parameter
    return rename


class StaticSource:
    """The static model's count formulas as fixed structures of one measured metric.

    A measured call path gets the prior of the static model's function its last frame
    names (``main->dgemm(double*, int)`` -> ``dgemm``). The formula counts the function's
    code with its callees, so it speaks for the call path's inclusive time.

    Args:
        summary: the static model's summary (:func:`~perfcast.static.summary.
            read_static_summary`: ``perfcast static ... -o model.py`` writes it beside
            the module as ``model.json``).
        metric: the measured metric the formulas constrain.
        count: ``instructions``, ``fp_instructions`` or an instruction category.
        rename: static model parameter -> experiment parameter.
        path: where the summary was read from, for messages.
    """

    name = SOURCE

    def __init__(
        self,
        summary: StaticSummary,
        *,
        metric: str = TIME_METRIC,
        count: str = "instructions",
        rename: Mapping[str, str] | None = None,
        path: str | Path | None = None,
    ):
        self.summary = summary
        self.metric = metric
        self.count = count
        self.rename = dict(rename or {})
        self.path = path

    @classmethod
    def read(cls, path: str | Path, **options: Any) -> StaticSource:
        """The summary at ``path``: the JSON file, or the generated ``.py`` beside it."""
        return cls(read_static_summary(path), path=path, **options)

    def derive(self, experiment: Experiment) -> DerivedPriors:
        """A fixed structure of :attr:`metric` for every measured call path whose function
        the static model has, and notes on what matched nothing.

        The formula counts one call; where the measurements have the call path's visits
        and they grow with the parameters (``sweep`` called ``iterations`` times), the
        prior is the formula's terms times the visits' terms."""
        if self.metric not in experiment.metrics:
            raise InputError(
                f"the static priors constrain the metric {self.metric!r}, which the "
                f"measurements lack (they have {', '.join(experiment.metrics)})",
                path=self.path,
            )
        matched = {
            callpath: name
            for callpath in experiment.callpaths
            if (name := function_name(split_callpath(callpath)[-1])) in self.summary.functions
        }
        visits, irregular = _visit_terms(experiment, list(matched))
        known = set(experiment.parameters)
        priors: dict[tuple[str, str], Prior] = {}
        foreign: dict[str, list[str]] = {}
        for callpath, name in matched.items():
            if callpath in irregular:
                continue
            formula = self.summary.functions[name].formula(self.count)
            prior = prior_from_formula(formula, self.rename, visits.get(callpath, ()))
            unknown = sorted(
                {f.parameter for shape in prior.structure or () for f in shape} - known
            )
            if unknown:
                foreign[callpath] = unknown
                continue
            priors[(callpath, self.metric)] = prior
        notes = []
        if foreign:
            notes.append(
                f"{len(foreign)} call path(s) keep no static prior: their formulas use "
                f"parameters the measurements do not vary (rename them to the experiment's "
                f"parameters {sorted(known)} with --static-rename): "
                f"{name_list(list(foreign), tags=foreign)}"
            )
        if irregular:
            notes.append(
                f"{len(irregular)} call path(s) keep no static prior: their visits follow no "
                "exact product of parameter powers, so the number of calls the formula "
                f"counts once is unknown: {name_list(irregular)}"
            )
        unmatched = sorted(set(self.summary.functions) - set(matched.values()))
        if unmatched:
            notes.append(
                f"{len(unmatched)} function(s) of the static model match no measured call "
                f"path: {', '.join(unmatched)}"
            )
        return DerivedPriors(SOURCE, priors, notes=tuple(notes))


EXACT_VISITS_SMAPE = 1.0
"""Visits are counted, not timed: a model of them within 1 % SMAPE is the count itself (a
mean over ranks of integer counts can leave a fraction of a percent)."""


def _visit_terms(
    experiment: Experiment, callpaths: list[str]
) -> tuple[dict[str, list[dict[str, Fraction]]], list[str]]:
    """Per call path whose measured visits grow with the parameters, the terms of their
    model as parameter -> power (``{}`` the constant); and the call paths whose visits
    fit no exact product of powers. Without a visits metric (Extra-P files) every formula
    stands for the call path as it is."""
    if VISITS_METRIC not in experiment.metrics or not callpaths:
        return {}, []
    counted = experiment.restricted(callpaths=callpaths, metrics=[VISITS_METRIC])
    models = PMNFModeler(significance=0).fit(counted)
    terms: dict[str, list[dict[str, Fraction]]] = {}
    irregular: list[str] = []
    for callpath in callpaths:
        model = models.get((callpath, VISITS_METRIC))
        if model is None or model.is_constant():
            continue
        if not _exact_powers(model):
            irregular.append(callpath)
            continue
        constant: list[dict[str, Fraction]] = [{}] if abs(model.constant) >= 0.5 else []
        terms[callpath] = constant + [
            {f.parameter: f.exponent for f in term.factors} for term in model.terms
        ]
    return terms, irregular


def _exact_powers(model: Model) -> bool:
    """Whether ``model`` reproduces counted visits: within :data:`EXACT_VISITS_SMAPE`
    and without logarithms (loop trip counts multiply, they do not take logarithms)."""
    logarithms = any(f.log_exponent for term in model.terms for f in term.factors)
    return not logarithms and model.statistics.smape <= EXACT_VISITS_SMAPE
