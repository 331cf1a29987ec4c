"""The taint profile's word on each call path, for the report (``--taint``).

A model fitted under a taint prior is only as credible as the prior: a reader who sees
``p^(1/2) * size`` should see beside it which parameters the code can depend on at all,
which function of the profile said so, and whether the call path was found in the profile
or only matched by its function's name. The match is :func:`perfcast.taint.validity.
match_profile`, the one ``perfcast model --taint`` fits with, so the report shows the
priors the models were fitted under, not a second reading of the profile.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from perfcast.experiment.experiment import Experiment
from perfcast.taint.profile_model import TaintProfile
from perfcast.taint.validity import match_profile

BY_CALLPATH = "by call path"
BY_FUNCTION = "by function name (the profile never saw this call path)"
BY_CALLER = "by its caller's loops (constant per call)"


@dataclass(frozen=True)
class CallpathPrior:
    """The taint prior of one measured call path and where it came from."""

    prior: str
    """:meth:`perfcast.modeling.prior.Prior.describe`: the parameters (and products)
    the code may depend on."""
    matched: str
    functions: list[tuple[str, str]]
    """(function, its dependency in the profile, ``p * size + size``) of each profile
    function the call path's last frame names."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TaintPriors:
    by_callpath: dict[str, CallpathPrior]
    notes: list[str]
    """What the match leaves out (unmatched call paths, dropped parameters)."""


def taint_priors(profile: TaintProfile, experiment: Experiment) -> TaintPriors:
    """The prior of each of ``experiment``'s call paths the profile speaks for."""
    match = match_profile(profile, experiment)
    by_function = set(match.by_function)
    found = {}
    for callpath, prior in match.priors.items():
        owners = match.functions.get(callpath, [])
        if callpath in by_function:
            how = BY_FUNCTION
        elif owners:
            how = BY_CALLPATH
        else:
            how = BY_CALLER
        functions = [(name, profile.functions[name].dependency) for name in owners]
        found[callpath] = CallpathPrior(prior.describe(), how, functions)
    return TaintPriors(found, match.notes())
