"""What the modeler and the instrumenter take from a taint profile.

* ``priors_from_profile``: one :class:`~perfcast.modeling.prior.Prior` per call path --
  only the parameters its dependency names may appear, only the parameters of one
  dependency term may multiply, and a call path with dependency ``1`` gets a constant model
  (paper sections B1 and 4.5).

The instrumentation filter is in :mod:`perfcast.taint.filter`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from perfcast.modeling.prior import Prior
from perfcast.taint.profile_model import Dependency, TaintProfile, add, measured_callpath

SOURCE = "taint"


def priors_from_profile(
    profile: TaintProfile,
    *,
    parameters: Collection[str] | None = None,
    inclusive: bool = True,
) -> dict[str, Prior]:
    """A prior per call path of the profile (user functions and library routines).

    Args:
        profile: a taint profile (:func:`~perfcast.taint.profile_model.read_profile`).
        parameters: the experiment's parameters; others are dropped from the priors (a
            parameter held fixed in the experiment cannot appear in a model anyway).
            ``None`` keeps every parameter of the profile.
        inclusive: use the inclusive dependency (callees included), for inclusive metrics;
            ``False`` uses the function's own loops only, for exclusive metrics.

    Either way the prior bounds the call path's total over its visits
    (:meth:`~perfcast.taint.profile_model.CallpathProfile.total`). Call paths are keyed
    as measurements spell them (:func:`~perfcast.taint.profile_model.measured_callpath`):
    the entries of two ``static`` functions that print alike (``main->helper [a.c]``,
    ``main->helper [b.c]``) are one measured call path, ``main->helper``, whose cost is
    theirs added.
    """
    totals: dict[str, Dependency] = {}
    for function in profile.functions.values():
        for callpath, entry in function.callpaths.items():
            measured = measured_callpath(callpath)
            totals[measured] = add(
                totals.get(measured, frozenset()), entry.total(inclusive=inclusive)
            )
    return {callpath: prior_from_terms(total, parameters) for callpath, total in totals.items()}


def function_priors_from_profile(
    profile: TaintProfile,
    *,
    parameters: Collection[str] | None = None,
    inclusive: bool = True,
) -> dict[str, Prior]:
    """A prior per function of the profile, keyed by its demangled name.

    For measured call paths the profile never saw (another call site, a run that took other
    branches): the function's call paths merged, so it is the loosest restriction the code
    supports. Arguments as for :func:`priors_from_profile`.
    """
    return {
        name: prior_from_terms(function.total(inclusive=inclusive), parameters)
        for name, function in profile.functions.items()
    }


def prior_from_terms(
    terms: Iterable[Iterable[str]], parameters: Collection[str] | None = None
) -> Prior:
    """The prior of one dependency given as a sum of parameter products.

    Parameters outside ``parameters`` (if given) are dropped; products contained in a larger
    one are absorbed; no product left means a constant. The products are ordered (larger
    first, then by name) so that the prior, and its description, do not depend on the
    order of a set.
    """
    groups = {frozenset(t) for t in terms}
    if parameters is not None:
        groups = {t & frozenset(parameters) for t in groups}
    kept = sorted(
        (t for t in groups if t and not any(t < other for other in groups)),
        key=lambda t: (-len(t), sorted(t)),
    )
    if not kept:
        return Prior.constant(SOURCE)
    return Prior(SOURCE, parameters=frozenset().union(*kept), multiplicative=tuple(kept))
