"""What the modeler and the instrumenter take from a taint profile.

* ``priors_from_profile``: one :class:`~perfcast.modeling.prior.Prior` per call path --
  only the parameters its dependency names may appear, only the parameters of one
  dependency term may multiply, and a call path with dependency ``1`` gets a constant model
  (paper sections B1 and 4.5).

The instrumentation filter is in :mod:`perfcast.taint.filter`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from perfcast.errors import InputError
from perfcast.modeling.prior import Prior
from perfcast.taint.profile import FORMAT

SOURCE = "taint"


def _check(profile: Mapping[str, Any]) -> None:
    if profile.get("format") != FORMAT:
        raise InputError(
            f"not a perfcast taint profile (format {profile.get('format')!r}, expected {FORMAT!r})"
        )


def callpath_terms(entry: Mapping[str, Any], *, inclusive: bool = True) -> list[list[str]]:
    """The dependency of a call path's measured *total*: per-call cost times visits.

    Profilers sum a call path's time, counters and bytes over all its visits, so a
    constant-cost function called ``n`` times measures ``n``; the per-call dependency
    (``terms``, or ``exclusive_terms``) is multiplied by that of the visit count
    (``visits_terms``: the loops around the call sites up the path).
    """
    per_call = entry["terms"] if inclusive else entry.get("exclusive_terms", entry["terms"])
    visits = [frozenset(t) for t in entry.get("visits_terms", [])] or [frozenset()]
    return [sorted(v | frozenset(t)) for v in visits for t in (per_call or [[]])]


def priors_from_profile(
    profile: Mapping[str, Any],
    *,
    parameters: Collection[str] | None = None,
    inclusive: bool = True,
) -> dict[str, Prior]:
    """A prior per call path of the profile (user functions and library routines).

    Args:
        profile: a taint profile (the dict ``perfcast taint`` writes as JSON).
        parameters: the experiment's parameters; others are dropped from the priors (a
            parameter held fixed in the experiment cannot appear in a model anyway).
            ``None`` keeps every parameter of the profile.
        inclusive: use the inclusive dependency (callees included), for inclusive metrics;
            ``False`` uses the function's own loops only, for exclusive metrics.

    Either way the prior bounds the call path's total over its visits
    (:func:`callpath_terms`).
    """
    _check(profile)
    return {
        callpath: prior_from_terms(callpath_terms(entry, inclusive=inclusive), parameters)
        for function in profile["functions"].values()
        for callpath, entry in function["callpaths"].items()
    }


def function_priors_from_profile(
    profile: Mapping[str, Any],
    *,
    parameters: Collection[str] | None = None,
    inclusive: bool = True,
) -> dict[str, Prior]:
    """A prior per function of the profile, keyed by its demangled name.

    For measured call paths the profile never saw (another call site, a run that took other
    branches): the function's call paths merged, so it is the loosest restriction the code
    supports. Arguments as for :func:`priors_from_profile`.
    """
    _check(profile)
    return {
        name: prior_from_terms(
            [
                t
                for entry in function["callpaths"].values()
                for t in callpath_terms(entry, inclusive=inclusive)
            ]
            or function["terms"],
            parameters,
        )
        for name, function in profile["functions"].items()
    }


def prior_from_terms(
    terms: Iterable[Iterable[str]], parameters: Collection[str] | None = None
) -> Prior:
    """The prior of one dependency given as a sum of parameter products.

    Parameters outside ``parameters`` (if given) are dropped; products contained in a larger
    one are absorbed; no product left means a constant.
    """
    groups = [frozenset(t) for t in terms]
    if parameters is not None:
        groups = [t & frozenset(parameters) for t in groups]
    groups = [t for t in groups if t and not any(t < other for other in groups)]
    if not groups:
        return Prior.constant(SOURCE)
    allowed = frozenset().union(*groups)
    return Prior(SOURCE, parameters=allowed, multiplicative=tuple(dict.fromkeys(groups)))
