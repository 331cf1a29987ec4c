"""What the modeler and the instrumenter take from a taint profile.

* ``priors_from_profile``: one :class:`~perfcast.modeling.prior.Prior` per call path --
  only the parameters its dependency names may appear, only the parameters of one
  dependency term may multiply, and a call path with dependency ``1`` gets a constant model
  (paper sections B1 and 4.5).
* ``relevant_functions`` / ``write_filter``: the functions whose cost depends on some
  parameter, one name per line -- what to instrument (paper section A3).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
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
    priors: dict[str, Prior] = {}
    for function in profile["functions"].values():
        for callpath, entry in function["callpaths"].items():
            terms = [frozenset(t) for t in entry.get(key, entry["terms"])]
            if parameters is not None:
                terms = [t & frozenset(parameters) for t in terms]
            terms = [t for t in terms if t and not any(t < other for other in terms)]
            if not terms:
                priors[callpath] = Prior.constant(SOURCE)
                continue
            allowed = frozenset().union(*terms)
            priors[callpath] = Prior(
                SOURCE, parameters=allowed, multiplicative=tuple(dict.fromkeys(terms))
            )
    return priors


def relevant_functions(profile: Mapping[str, Any]) -> list[str]:
    """Functions of the program whose cost depends on a parameter (library routines, which
    profilers intercept anyway, are not listed)."""
    _check(profile)
    return list(profile["relevant"])


def write_filter(profile: Mapping[str, Any], path: Path) -> None:
    """The instrumentation filter: one function name per line."""
    path.write_text("".join(f"{name}\n" for name in relevant_functions(profile)))
