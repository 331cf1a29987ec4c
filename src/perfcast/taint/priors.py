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
    """
    _check(profile)
    key = "terms" if inclusive else "exclusive_terms"
    return {
        callpath: prior_from_terms(entry.get(key, entry["terms"]), parameters)
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
    branches): the function's entry merges the labels of all its call paths, so it is the
    loosest restriction the code supports. Arguments as for :func:`priors_from_profile`.
    """
    _check(profile)
    key = "terms" if inclusive else "exclusive_terms"
    return {
        name: prior_from_terms(function.get(key, function["terms"]), parameters)
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
