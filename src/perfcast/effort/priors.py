"""Noise-resilient priors from effort counters (``noise-resilient-priors.txt`` III-B, III-C).

Basic-block counts and MPI byte counts are identical from run to run, so a model of them
finds the right exponents even when time is noisy. The exponents become a prior: a fixed
structure of term shapes whose coefficients alone are fitted to the (noisy) time.

* **Computation** (call paths that are not MPI leaves): the ``basic_blocks`` model's term
  shapes, coefficients dropped.
* **Communication** (leaves named ``MPI_*``): the byte model ``B(p, x)`` inserted into the
  operation's law of Table I (:mod:`perfcast.effort.laws`). ``B`` is modeled from
  ``mpi_bytes_sent``: under the runtime's byte rules the rank-mean of the bytes *sent* is an
  exact PMNF term for every collective (a Bcast root sends ``p*|buf|``, so the mean is
  ``|buf|``), whereas the received side mixes root and non-root shares into ``(p-1)/p``
  factors. Receive-only routines (Recv, Irecv) send nothing; for a call path whose sent
  bytes are all zero, ``mpi_bytes_received`` is modeled instead. The recorded mean is not
  always the law's message size (an Allreduce records ``p*|buf|`` per rank for a vector of
  ``|buf|``): the law converts it (``laws.RECORDED_BYTES_RANKS_POWER``).

Counts have a search of their own (:mod:`perfcast.effort.counts`): they have no noise, and a
kernel's counts are often sums of loop nests of different depths (``a*n^2 + b*n*p``) that
the time modeler's one-shape-per-parameter space cannot express. Where the time model
that obeys the prior fits far worse than the unconstrained (black-box) one, the effort does
not explain the time: waiting time (blocking communication, load imbalance) or noise. A
prior must not make a model worse unnoticed: such a call path keeps the black-box time
model, whose warning gives both fits (:mod:`perfcast.modeling.prior_conflicts`; the
thresholds are :data:`DISAGREEMENT_RATIO` and :data:`DISAGREEMENT_GAP`).

That comparison hardly sees busy waiting: a process spinning until a condition holds adds
basic blocks with every turn, so the prior carries the waiting and the two time models tend
to agree. The counts themselves show it (:mod:`perfcast.effort.waiting`): deterministic
code executes the same blocks in every repetition of a point, a spin loop does not. A call
path whose counts vary between repetitions keeps its prior (from the median counts) and its
time model gets :data:`WAITING_WARNING`. The check needs two or more repetitions per point;
with one it says nothing.

Missing counters never stop modeling: a call path without the counts it needs, or with
counts but no time, is modeled classically and a note says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from fractions import Fraction

import numpy as np

from perfcast.effort.counts import NO_EXACT_WARNING, CountModeler
from perfcast.effort.laws import RANKS_PARAMETER, CommunicationLaw
from perfcast.effort.waiting import REPETITION_TOLERANCE
from perfcast.experiment.experiment import AGGREGATIONS, CALLPATH, METRIC, Experiment
from perfcast.experiment.metrics import (
    BYTES_RECEIVED,
    BYTES_SENT,
    COMPUTATION_METRIC,
    COUNTER_METRICS,
    TIME_METRIC,
    VISITS_METRIC,
)
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.options import Estimator, Flag, document_options, option
from perfcast.modeling.pmnf import Factor, Model
from perfcast.modeling.prior import Prior
from perfcast.modeling.prior_conflicts import (
    CONFLICT_GAP,
    CONFLICT_RATIO,
)

PRIOR_SOURCE = "effort"

VISITS_KIND = "computation, from visits"
"""The kind of a computation prior taken from the call path's exact visits because its
basic-block counts have no exact model (:func:`_from_visits`)."""

DISAGREEMENT_RATIO = CONFLICT_RATIO
"""Flag a call path when the effort-prior time model's SMAPE on its training points exceeds
the black-box model's by this factor ...

Training SMAPE rather than the selection criterion, so the test reads the same (percent)
whichever criterion the modeler uses. A factor of 2 tolerates the prior's lost freedom (it
may not bend towards noise, so it fits a little worse by design) but catches time growing
with a parameter the counts do not grow with."""

DISAGREEMENT_GAP = CONFLICT_GAP
"""... and by at least this many percentage points, so near-perfect fits (0.1 % vs 0.3 %)
are not flagged for a difference nobody could act on."""

DISAGREEMENT_WARNING = "time and effort disagree: waiting time or noise"

CLASSIC_FALLBACK = "; no effort prior"
"""How a note on a call path without a prior ends (``main->MPI_Wait: MPI_Wait has no
communication law; no effort prior``). What the call path got instead -- a black-box model
or another source's prior -- each model says itself (its ``prior``)."""

WAITING_WARNING = "effort counts vary between repetitions"
"""The start of the warning on the time model of a call path whose counts differ between
repetitions of a point (:mod:`perfcast.effort.waiting`); the rest says by how much, where,
and that the prior carries busy waiting or timing-dependent control flow."""

COEFFICIENT_AGGREGATION = "min"
"""How the repetitions of a point are aggregated before the coefficients of a prior are
fitted: each point's fastest repetition.

Interference (other processes, daemons, the network) only ever adds time to the counted
work, so the fastest repetition is the closest to the work's own time; every other centre
carries the interference's mean factor into every prediction. The black-box modeler avoids
the minimum because its extreme-value noise would pull exponents; under a prior the
exponents are fixed and only coefficients move. Measured in
``benchmarks/results/noise_study.txt`` (computation, 34 generated kernels, relative error at
the next point beyond the training range): without injected noise 6.2 % with the minimum
against 6.7 % with the time modeler's Huber centre, at uniform +75 % noise on every
repetition 12.4 % against 40.7 % (classic modeling: 9.6 % and 33.2 %). With one repetition
per point (the paper's cost) every aggregation is the same."""

COST_RATIO = 100.0
"""Most time per unit of counted work a lower-order effort term may take, relative to the
lead term's (:func:`_costly_terms`): blocks of one kernel differ in cost (a division, a
cache miss), by tens at most, not by thousands."""

KEEP, DROP, DROP_LOWER = "keep", "drop", "drop-lower"
NEGATIVE_TERM_POLICIES = (DROP_LOWER, DROP, KEEP)
"""What happens to an effort term whose coefficient fitted to time comes out negative.

* ``"drop-lower"`` (default): the terms that carry a parameter's leading growth
  (:func:`leading_shapes`) are kept whatever their sign; other terms whose coefficient
  comes out negative are dropped and the call path refitted.
* ``"drop"``: every term with a negative coefficient is dropped, leading ones too.
* ``"keep"``: coefficients are fitted whatever their sign (the paper's method).

The counts say the work of every term exists; a negative time coefficient means the term
is below the noise at the measured points, or correlated with a larger term over the
measured range so that the fit traded one against the other. A negative lower-order term
only bends extrapolations (and can turn them negative far out), so it goes; dropping a
parameter's leading term would throw away the very growth the counts found (``"drop"``
then extrapolates with a smaller term's exponent), so it stays. On the generated
benchmarks of ``benchmarks/results/noise_study.txt`` the three policies predict alike
(negative coefficients are rare there); ``"drop"`` alone loses exponents under heavy
noise."""


@dataclass
class EffortPrior:
    """The prior of one call path and where it came from."""

    callpath: str
    kind: str  # "computation" or "communication"
    effort: Model  # the counter model the prior was derived from
    prior: Prior
    law: CommunicationLaw | None = None

    def describe(self) -> str:
        base = self.prior.describe()
        return base if self.law is None else f"{base} ({self.law.describe()})"


@document_options
@dataclass(eq=False)
class EffortModeler(Estimator):
    """Effort-prior modeling on top of a :class:`PMNFModeler`: the priors (:meth:`derive`)
    and the coefficient fit under fixed structures (:meth:`fit_coefficients`).

    The models themselves come from the priors stage, the one pipeline for every source
    (:func:`perfcast.priors.fit_with_priors`, through
    :func:`perfcast.workflows.model.fit_models` as ``perfcast model`` runs it): it derives the
    priors once (:class:`~perfcast.effort.source.EffortSource`), fits them with this modeler
    and keeps the black-box model where a prior conflicts with the time.

    The time coefficients are fitted by the time modeler itself (its relative weighting and
    fitting), on the points aggregated by ``aggregation``: by default each point's fastest
    repetition (:data:`COEFFICIENT_AGGREGATION` says why). The black-box time models, which
    the report shows beside the constrained ones, keep the time modeler's own aggregation;
    the conflict rule (:func:`~perfcast.modeling.prior_conflicts.resolve_conflict`, with
    ``disagreement_ratio`` and ``disagreement_gap``) compares the constrained fit with a
    black-box fit to the same points (:meth:`comparable_blackbox`).
    A modeler in the sense of :mod:`perfcast.modeling` (options below, checked when given;
    the time modeler's options are also this one's as ``modeler__terms`` and so on).
    """

    modeler: PMNFModeler = option(  # noqa: RUF009 (option() is a field specifier)
        default_factory=PMNFModeler,
        doc="the time modeler (its exponent sets also bound the count models).",
    )
    _: KW_ONLY
    time_metric: str = option(
        TIME_METRIC,
        doc="the metric the priors constrain.",
        flag=Flag(
            "--time-metric",
            help="the metric the effort and static priors constrain (default {default})",
        ),
    )
    ranks: str = option(
        RANKS_PARAMETER,
        doc="the parameter counting MPI ranks (for the ``log2(p)`` latency terms).",
        flag=Flag(
            "--ranks-parameter",
            help="the parameter counting MPI ranks: the log2(p) latency of collectives, and "
            "what --efficiency scales along (default {default})",
        ),
    )
    disagreement_ratio: float = option(
        DISAGREEMENT_RATIO, minimum=1, doc="see :data:`DISAGREEMENT_RATIO`."
    )
    disagreement_gap: float = option(
        DISAGREEMENT_GAP, minimum=0, doc="see :data:`DISAGREEMENT_GAP`."
    )
    negative_terms: str = option(
        DROP_LOWER,
        choices=NEGATIVE_TERM_POLICIES,
        doc="the policy for effort terms whose time coefficient comes out negative "
        "(:data:`NEGATIVE_TERM_POLICIES`). The time modeler's own ``positive_terms`` option "
        "governs its black-box search only.",
    )
    aggregation: str | None = option(
        COEFFICIENT_AGGREGATION,
        choices=AGGREGATIONS,
        optional=True,
        doc="how a point's repetitions are aggregated for the coefficient fit, one of the "
        "time modeler's aggregations; ``None`` takes the time modeler's own "
        "(:attr:`coefficient_aggregation`).",
        flag=Flag(
            "--effort-aggregate",
            help="how a point's repetitions are aggregated before the prior's coefficients "
            "are fitted (default {default}: interference only adds time, and under a prior "
            "the exponents cannot follow the minimum's noise)",
        ),
    )
    repetition_tolerance: float = option(
        REPETITION_TOLERANCE,
        minimum=0,
        doc="the relative range of counts across repetitions (``(max - min) / median``) "
        "above which a call path is taken to wait busily (:data:`REPETITION_TOLERANCE`).",
    )

    @property
    def coefficient_aggregation(self) -> str:
        """The aggregation of the coefficient fit: ``aggregation``, or the time modeler's."""
        return self.aggregation or self.modeler.aggregation

    def counter_modeler(self) -> CountModeler:
        """The count modeler, in the time modeler's search space (exponent sets)."""
        return CountModeler(self.modeler.space, min_points=self.modeler.min_points)

    # -- priors --------------------------------------------------------------------------

    def derive(self, experiment: Experiment) -> tuple[dict[str, EffortPrior], ModelSet, list[str]]:
        """Effort priors by call path, the counter models, and notes on call paths that
        get no prior."""
        notes: list[str] = []
        counters = _counter_experiment(experiment)
        timed = _callpaths_with(experiment, self.time_metric)
        if counters is None:
            notes.append(
                f"the measurements have no effort counters ({', '.join(COUNTER_METRICS)}); "
                "build the program with `perfcast build --counters` and measure again. "
                "Every call path is modeled classically."
            )
            return {}, ModelSet(experiment.parameters), notes
        counter_models = self.counter_modeler().fit(counters)
        visits = ModelSet(experiment.parameters)
        if VISITS_METRIC in experiment.columns.metrics:
            visits = self.counter_modeler().fit(experiment.restricted(metrics=[VISITS_METRIC]))
        priors: dict[str, EffortPrior] = {}
        for callpath in experiment.callpaths:
            entry, note = self._prior_for(callpath, counter_models, experiment.parameters)
            entry = _from_visits(entry, visits.get((callpath, VISITS_METRIC)))
            if callpath not in timed:
                if entry is not None:
                    notes.append(
                        f"{callpath}: has effort counts but no {self.time_metric!r} "
                        "measurements; its counts are modeled, there is no time model to "
                        "constrain"
                    )
                continue
            if entry is None:
                notes.append(f"{callpath}: {note}{CLASSIC_FALLBACK}")
            else:
                priors[callpath] = entry
        return priors, counter_models, notes

    def _prior_for(
        self, callpath: str, counters: ModelSet, parameters: list[str]
    ) -> tuple[EffortPrior | None, str]:
        law = CommunicationLaw.for_callpath(callpath)
        leaf = callpath.rsplit("->", 1)[-1]
        if law is None and leaf.startswith("MPI_"):
            return None, f"{leaf} has no communication law (Table I)"
        if law is None:
            if (callpath, COMPUTATION_METRIC) not in counters:
                return None, f"no {COMPUTATION_METRIC!r} counts"
            effort = counters[(callpath, COMPUTATION_METRIC)]
            prior = Prior.fixed(
                PRIOR_SOURCE, (t.shape for t in effort.terms), (t.coefficient for t in effort.terms)
            )
            return EffortPrior(callpath, "computation", effort, prior), ""
        bytes_model = _bytes_model(counters, callpath)
        if bytes_model is None and law.law.moves_bytes:
            return None, f"no {BYTES_SENT!r}/{BYTES_RECEIVED!r} counts"
        structure = law.structure(bytes_model, parameters, self.ranks)
        prior = Prior.fixed(PRIOR_SOURCE, structure)
        effort = bytes_model or Model(callpath, BYTES_SENT, 0.0)
        return EffortPrior(callpath, "communication", effort, prior, law), ""

    # -- fitting ------------------------------------------------------------------------

    def fit_coefficients(
        self, experiment: Experiment, priors: Mapping[str, Prior], metric: str | None = None
    ) -> list[Model]:
        """Models of ``metric`` (default: the time metric) of the call paths in
        ``priors``, under those fixed structures: coefficients only.

        The priors stage fits every fixed structure so
        (:class:`~perfcast.modeling.prior_fit.FixedFit`; the static model's too: the reasons
        for the aggregation hold whatever fixed the exponents); calling it directly reuses
        priors already derived (:meth:`derive`), e.g. for many noisy copies of one
        campaign's time, which share that campaign's counts.

        Terms whose coefficient comes out negative are treated by the ``negative_terms``
        policy (:data:`NEGATIVE_TERM_POLICIES`); a dropped term means a refit of the call
        path with the smaller structure, which shrinks every round, so this ends."""
        metric = metric or self.time_metric
        # the fit sees every sign; the policy, not the modeler's search, decides
        fitter = self.modeler.with_params(
            positive_terms=False, aggregation=self.coefficient_aggregation
        )
        pending = dict(priors)
        protected = {  # the terms "drop-lower" never drops
            callpath: leading_shapes(prior.structure or ())
            for callpath, prior in pending.items()
            if self.negative_terms == DROP_LOWER
        }
        dropped: dict[str, list[str]] = {}
        expensive: dict[str, list[str]] = {}
        columns = zip(experiment.parameters, experiment.columns.coordinates, strict=True)
        largest = {p: float(np.max(c)) if len(c) else 1.0 for p, c in columns}
        fitted: list[Model] = []
        while pending:
            timed = experiment.restricted(callpaths=list(pending), metrics=[metric])
            retry: dict[str, Prior] = {}
            for model in fitter.fit(timed, priors=pending):
                negative = {_key(t.shape) for t in model.terms if t.coefficient < 0}
                negative -= protected.get(model.callpath, set())
                prior = pending[model.callpath]
                costly = _costly_terms(model, prior, largest)
                costly -= protected.get(model.callpath, set())
                # costly terms first, then negative ones: each drop refits without them
                drops = ((costly, expensive), (negative, dropped))
                rejected = next(((terms, log) for terms, log in drops if terms), None)
                if rejected is not None and self.negative_terms != KEEP:
                    terms, record = rejected
                    kept = [s for s in prior.structure or () if _key(s) not in terms]
                    retry[model.callpath] = _restricted(prior, kept)
                    record.setdefault(model.callpath, []).extend(
                        " * ".join(f.text() for f in shape) for shape in sorted(terms)
                    )
                    continue
                said = []  # part of this fit: facts of the model
                if model.callpath in dropped:
                    said.append(
                        f"{prior.source} terms [{', '.join(dropped[model.callpath])}] "
                        f"dropped: their coefficients fitted to {metric} came out "
                        "negative (below the noise)"
                    )
                if model.callpath in expensive:
                    said.append(
                        f"{prior.source} terms [{', '.join(expensive[model.callpath])}] "
                        f"dropped: fitted to {metric}, a unit of their counted work would "
                        f"cost more than {COST_RATIO:g}x a unit of the lead term's, or less "
                        "than nothing (noise the small term absorbed, not its work)"
                    )
                if said:
                    model = replace(
                        model,
                        prior=priors[model.callpath].describe(),  # what was derived
                        warnings=(*model.warnings, *said),
                    )
                fitted.append(model)
            pending = retry
        return fitted

    def comparable_blackbox(
        self, experiment: Experiment, callpaths: Sequence[str], metric: str, free: ModelSet
    ) -> ModelSet:
        """Black-box models of ``metric`` of ``callpaths`` fitted to the points the
        coefficients are fitted to, for the conflict rule: ``free`` itself when the
        aggregations agree, else a second black-box fit."""
        if self.coefficient_aggregation == self.modeler.aggregation or not callpaths:
            return free
        timed = experiment.restricted(callpaths=list(callpaths), metrics=[metric])
        return self.modeler.with_params(aggregation=self.coefficient_aggregation).fit(timed)


def _from_visits(entry: EffortPrior | None, visits: Model | None) -> EffortPrior | None:
    """A computation prior whose basic-block counts have no exact model, from the call
    path's visits where those are exact and grow: the work of each visit then varies in no
    PMNF form (a map lookup whose depth depends on the rank, data-dependent branches),
    but how often the function runs is counted exactly, and that is the lead term
    (miniFE's ``find_row_for_id``: ``(3 nx + 1)^3 / p`` calls)."""
    if entry is None or entry.kind != "computation" or visits is None or not visits.terms:
        return entry
    if not any(w.startswith(NO_EXACT_WARNING) for w in entry.effort.warnings):
        return entry
    if any(w.startswith(NO_EXACT_WARNING) for w in visits.warnings):
        return entry
    prior = Prior.fixed(
        PRIOR_SOURCE, (t.shape for t in visits.terms), (t.coefficient for t in visits.terms)
    )
    return EffortPrior(entry.callpath, VISITS_KIND, visits, prior)


def _restricted(prior: Prior, kept: Sequence[Sequence[Factor]]) -> Prior:
    """``prior`` with only the shapes ``kept``, each with its count."""
    structure = prior.structure or ()
    counts = None
    if prior.counts is not None:
        by_shape = {_key(s): c for s, c in zip(structure, prior.counts, strict=True)}
        counts = [by_shape[_key(s)] for s in kept]
    return Prior.fixed(prior.source, kept, counts)


def _costly_terms(
    model: Model, prior: Prior, largest: Mapping[str, float]
) -> set[tuple[Factor, ...]]:
    """The terms of a model fitted under counted work whose time per unit of that work
    exceeds :data:`COST_RATIO` times the lead term's, or has the opposite sign: a
    lower-order term that counts a few hundred blocks cannot take milliseconds (NAS IS's
    ``rank`` got 0.7 ms from the noise of oversubscribed runs on a term whose counts were
    negative). The lead term is the one with the most counted work at the largest measured
    point."""
    if prior.counts is None or not prior.structure:
        return set()
    fitted = {_key(t.shape): t.coefficient for t in model.terms}
    work: dict[tuple[Factor, ...], float] = {}
    per_unit: dict[tuple[Factor, ...], float] = {}
    for shape, count in zip(prior.structure, prior.counts, strict=True):
        key = _key(shape)
        if key in fitted and count != 0:
            per_unit[key] = fitted[key] / count
            work[key] = abs(count) * float(
                np.prod([f.evaluate(np.array(largest[f.parameter])) for f in shape])
            )
    if not work:
        return set()
    lead = max(work, key=lambda k: work[k])
    if per_unit[lead] <= 0:
        return set()
    limit = COST_RATIO * per_unit[lead]
    # time of the opposite sign to the counted work (time added where work is taken away)
    # is as impossible as a unit of work a hundred times dearer than the lead term's
    return {k for k, cost in per_unit.items() if k != lead and not 0 <= cost <= limit}


def leading_shapes(structure: Sequence[Sequence[Factor]]) -> set[tuple[Factor, ...]]:
    """For every parameter of ``structure``, the term with its highest growth (largest
    exponent, then log exponent; ties broken by the term's factors): the terms that give a
    model its leading exponents, as keys (:func:`_key`)."""
    leading: dict[str, tuple[tuple[Fraction, int], tuple[Factor, ...]]] = {}
    for shape in structure:
        key = _key(shape)
        for factor in shape:
            growth = (factor.exponent, factor.log_exponent)
            best = leading.get(factor.parameter)
            if best is None or (growth, key) > best:
                leading[factor.parameter] = (growth, key)
    return {key for _, key in leading.values()}


def _key(shape: Sequence[Factor]) -> tuple[Factor, ...]:
    """A term shape independent of the order of its factors."""
    return tuple(sorted(shape))


def _callpaths_with(experiment: Experiment, metric: str) -> set[str]:
    data = experiment.data
    return set(data.loc[data[METRIC] == metric, CALLPATH])


def _counter_experiment(experiment: Experiment) -> Experiment | None:
    present = [m for m in COUNTER_METRICS if m in set(experiment.data[METRIC])]
    return experiment.restricted(metrics=present) if present else None


def _bytes_model(counters: ModelSet, callpath: str) -> Model | None:
    """The byte model ``B`` of an MPI call path: bytes sent, or received for a call path
    that sends nothing (see the module docstring)."""
    sent = counters.get((callpath, BYTES_SENT))
    received = counters.get((callpath, BYTES_RECEIVED))
    if sent is not None and not _is_zero(sent):
        return sent
    return received if received is not None else sent


def _is_zero(model: Model) -> bool:
    return not model.terms and bool(np.isclose(model.constant, 0.0))


__all__ = [
    "COEFFICIENT_AGGREGATION",
    "DISAGREEMENT_GAP",
    "DISAGREEMENT_RATIO",
    "DISAGREEMENT_WARNING",
    "DROP",
    "DROP_LOWER",
    "KEEP",
    "NEGATIVE_TERM_POLICIES",
    "WAITING_WARNING",
    "EffortModeler",
    "EffortPrior",
]
