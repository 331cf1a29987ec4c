"""The taint profile as one prior source of the composition (:mod:`perfcast.priors`).

:meth:`TaintSource.derive` matches the profile to the measured call paths
(:func:`~perfcast.taint.validity.match_profile`) and restricts every measured metric of a
matched call path; what it derived (:class:`TaintPriors`) then adds the validity flags of
the paper's section C (contention and noise, possible algorithm switches) as findings
(:meth:`TaintPriors.check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.modeling.findings import Finding
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.prior import DerivedPriors
from perfcast.taint.priors import SOURCE
from perfcast.taint.profile_model import TaintProfile
from perfcast.taint.validity import (
    TaintMatch,
    match_profile,
    unreachable_parameters,
    validity_findings,
)


@dataclass(frozen=True, kw_only=True)
class TaintPriors(DerivedPriors):
    """What :meth:`TaintSource.derive` found: the restrictions of the composition, and the
    profile and its match to the measured call paths, which :meth:`check` judges by."""

    profile: TaintProfile
    match: TaintMatch

    def check(
        self,
        models: ModelSet,
        free: ModelSet,
        experiment: Experiment,
        proven: Mapping[str, frozenset[str]],
    ) -> list[Finding]:
        """Contention/noise (judged on the black-box models ``free``) and possible
        algorithm switches, as findings of stage ``"taint"``.

        ``proven``: call path -> parameters exact counts showed the work depends on
        although the profile rules them out (:attr:`perfcast.priors.Composition.ruled_out`);
        a black-box model using them measured that work, not contention -- the
        composition's finding says what is wrong there."""
        match = self.match
        if proven:
            widened = dict(match.priors)
            for callpath, parameters in proven.items():
                if callpath in widened:
                    prior = widened[callpath]
                    allowed = (prior.parameters or frozenset()) | parameters
                    widened[callpath] = replace(prior, parameters=allowed)
            match = replace(match, priors=widened)
        return validity_findings(models, free, self.profile, experiment, match)


class TaintSource:
    """Taint priors for :func:`perfcast.priors.fit_with_priors`.

    Args:
        profile: the taint profile.
        inclusive: match inclusive dependencies (callees included), for inclusive metrics;
            ``False`` for metrics of each function's own code.
        apply: ``False``: the priors are advisory, compared with the other sources' but
            never fitted, and the models are only flagged (``--taint-mode check``).
        path: where the profile was read from: errors of the match name it.
    """

    name = SOURCE

    def __init__(
        self,
        profile: TaintProfile,
        *,
        inclusive: bool = True,
        apply: bool = True,
        path: str | Path | None = None,
    ):
        self.profile = profile
        self.path = path
        self.inclusive = inclusive
        self.apply = apply

    def derive(self, experiment: Experiment) -> TaintPriors:
        """A restriction of every metric of each matched call path (the pipeline leaves
        out the metrics another source knows exactly)."""
        try:
            match = match_profile(self.profile, experiment, inclusive=self.inclusive)
        except InputError as exc:
            if exc.path is not None or self.path is None:
                raise
            raise InputError(exc.reason, path=self.path) from None
        metrics = list(experiment.metrics)
        priors = {(c, m): prior for c, prior in match.priors.items() for m in metrics}
        unreachable = {  # contention, not work, where a black-box model uses these
            callpath: unreachable_parameters(self.profile, match, callpath, experiment.parameters)
            for callpath in match.priors
        }
        return TaintPriors(
            SOURCE,
            priors,
            notes=tuple(match.notes()),
            unreachable=unreachable,
            advisory=not self.apply,
            profile=self.profile,
            match=match,
        )


__all__ = ["TaintPriors", "TaintSource"]
