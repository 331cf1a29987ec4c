"""The modeling workflow: measurements in, the models a user sees by default out.

``perfcast model`` and ``perfcast report`` print what :func:`fit_models` returns, so that a
library user calling it gets the same answer as the command line. Its one policy is the
issue the tool exists for: **priors are the default, not an expert path.** Fitted
black-box, a compute kernel measured over a range where its working set leaves the cache
gets ``n^3 * log2(n)^2``: the log factor follows the cache, not the code. Where the input
carries the evidence that rules such shapes out, it is used without being asked for:

* **effort**: the input has basic-block or MPI byte counters (``perfcast build
  --counters``, ``--effort-counts``, or a counting campaign's ``app.counts.sqlite`` beside
  the store): their exact models fix the lead term of the time model; the time data fits
  the coefficients (and drops lower-order terms that come out negative,
  :data:`~perfcast.effort.priors.NEGATIVE_TERM_POLICIES`).
* **taint**: a taint profile was given, or lies beside the campaign store as
  ``app.taint.json`` (where ``perfcast taint perfcast.toml`` writes it): each call path is
  restricted to the parameters its code depends on.
* **static**: a static model was given (``--static``).

``priors=("none",)`` asks for the black-box models alone. Counts (counters, visits) are
modeled exactly in every case (:func:`perfcast.priors.pipeline.deterministic_metrics`), and
every model says which prior shaped it (its ``prior``), the notes say why each source was
chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from perfcast.appspec import COUNTS_SUFFIX, TAINT_PROFILE_SUFFIX, beside
from perfcast.effort.combine import combine_sources
from perfcast.effort.priors import EffortModeler
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import (
    COUNTER_METRICS,
    CPU_TIME_METRIC,
    TIME_METRIC,
    VISITS_METRIC,
)
from perfcast.experiment.names import name_list
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.provenance import Provenance, shared_cores_notes
from perfcast.priors import (
    PriorFit,
    PriorInputs,
    PriorSource,
    fit_with_priors,
    precedence,
    sources,
)
from perfcast.priors.report import render_priors

NO_PRIORS = "none"
"""The prior name that asks for the black-box models alone."""


def prior_choices() -> tuple[str, ...]:
    """The ``--priors`` words: every registered source, in precedence order, and ``none``."""
    return (*precedence(), NO_PRIORS)


TIME_METRICS = (TIME_METRIC, CPU_TIME_METRIC)


@dataclass(frozen=True)
class ModelingResult:
    """What :func:`fit_models` returns.

    Attributes:
        models: the models with every finding.
        priors: the prior sources used, in precedence order (empty: black-box).
        notes: one line each, for the user: which sources were chosen and why, and what
            the sources could not do.
        report: the side-by-side report of the fixed priors (effort, static), or ``None``.
        fit: the priors stage's whole result (black-box models, derived priors, conflicts).
    """

    models: ModelSet
    priors: tuple[str, ...]
    notes: tuple[str, ...]
    report: str | None
    fit: PriorFit


def beside_store(store: Path, suffix: str = TAINT_PROFILE_SUFFIX) -> Path | None:
    """The file beside the campaign store ``app.sqlite`` named ``app`` + ``suffix``: the
    taint profile ``perfcast taint perfcast.toml`` writes (``app.taint.json``), or the
    counting pass's store (``app.counts.sqlite``,
    :data:`~perfcast.appspec.COUNTS_SUFFIX`): its exact counts become priors
    without a flag."""
    candidate = beside(store, suffix)
    return candidate if candidate.is_file() else None


def campaign_files(store: Path) -> tuple[Path | None, Path | None]:
    """The taint profile and the counting campaign's store that lie beside the campaign
    store ``store`` (:func:`beside_store`), each ``None`` where absent; a counting store has
    no counting store of its own."""
    counts = None if store.name.endswith(COUNTS_SUFFIX) else beside_store(store, COUNTS_SUFFIX)
    return beside_store(store), counts


def choose_priors(
    experiment: Experiment,
    requested: Sequence[str] | None,
    inputs: PriorInputs,
) -> tuple[tuple[str, ...], list[str]]:
    """The prior sources to use and a note on each choice.

    ``requested`` (``--priors``) wins; ``None`` takes every source whose evidence is at
    hand (module docstring). A requested source without its input is an error naming the
    flag to add; ``"none"`` cannot be combined with a source."""
    if inputs.static_rename and inputs.static is None:
        raise InputError("--static-rename renames the parameters of --static MODELFILE: add it")
    if requested is not None and NO_PRIORS in requested:
        if len(set(requested)) > 1:
            raise InputError("--priors none asks for black-box models: name no other source")
        if inputs.taint is not None or inputs.static is not None:
            raise InputError("--priors none fits black-box models: leave --taint and --static out")
        return (), []
    names = set(requested or ())
    notes: list[str] = []
    for entry in sources():
        if entry.given(inputs) is not None:
            names.add(entry.name)  # the input alone implies its source
        elif entry.name in names and entry.flag is not None:
            raise InputError(f"--priors {entry.name} needs its input: add {entry.flag}")
        if requested is None:
            note = entry.unasked(experiment, inputs)
            if note is not None:
                names.add(entry.name)
                notes.append(note)
    return tuple(entry.name for entry in sources() if entry.name in names), notes


def effort_for(effort: EffortModeler, metrics: Sequence[str] | None) -> EffortModeler:
    """``effort`` with the time metric the user chose: ``--metric cpu_time`` alone means the
    priors constrain ``cpu_time`` (with ``time``, the default, nothing would be
    constrained)."""
    chosen = [m for m in (metrics or ()) if m in TIME_METRICS]
    if effort.time_metric == TIME_METRIC and len(chosen) == 1:
        return effort.with_params(time_metric=chosen[0])
    return effort


def prior_sources(
    names: Sequence[str], inputs: PriorInputs, effort: EffortModeler
) -> list[PriorSource]:
    """The prior sources ``names`` lists, each with its input read, in precedence order."""
    return [entry.build(inputs, effort) for entry in sources() if entry.name in names]


def fit_models(
    experiment: Experiment,
    effort: EffortModeler,
    priors: Sequence[str],
    inputs: PriorInputs = PriorInputs(),
) -> ModelingResult:
    """Model ``experiment`` under the prior sources ``priors`` (see :func:`choose_priors`),
    counts exactly, and time with ``effort.modeler``'s search."""
    sources = prior_sources(priors, inputs, effort)
    fit = fit_with_priors(effort.modeler, experiment, sources, fixed=effort)
    notes: list[str] = []
    for derived, report in zip(fit.derived, fit.reports, strict=True):
        if report is None:  # an own report shows its notes
            notes.extend(derived.notes)
    by_source: dict[str, dict[str, list[str]]] = {}
    for conflict in fit.conflicts:
        by_source.setdefault(conflict.source, {}).setdefault(conflict.callpath, []).append(
            conflict.metric
        )
    for source, metrics in by_source.items():
        notes.append(
            f"{sum(map(len, metrics.values()))} model(s) conflict with their {source} prior; "
            "each says which model was kept, with both fits, in its warnings: "
            f"{name_list(metrics, tags=metrics)}"
        )
    report = None
    if set(priors) - {"taint"}:  # taint's flags are in the models' warnings
        report = render_priors(fit, effort.time_metric)
    return ModelingResult(fit.models, tuple(priors), tuple(notes), report, fit)


def modeled_metrics(
    requested: Sequence[str] | None, experiment: Experiment, priors: Sequence[str]
) -> list[str] | None:
    """The metrics to fit: ``requested`` (``--metric``), and under effort priors also the
    counters and visits the priors are made from (``None``: every metric). ``--metric
    cpu_time`` chooses what the summary ranks, not what the priors may read: without the
    counters every call path silently lost its prior. Where ``requested`` names counters
    itself, the user chose which priors to derive (basic blocks without MPI bytes: the MPI
    call paths then take other priors), and only those are read."""
    if not requested or "effort" not in priors:
        return list(requested) if requested else None
    present = experiment.columns.metrics
    counters = [m for m in COUNTER_METRICS if m in present]
    if any(m in COUNTER_METRICS for m in requested):
        counters = []
    inputs = [*counters, *([VISITS_METRIC] if VISITS_METRIC in present else [])]
    return [*requested, *(m for m in inputs if m not in requested)]


def with_counts(
    experiment: Experiment, counts: Path, time_metric: str
) -> tuple[Experiment, list[str]]:
    """``experiment``'s time with the counters of the counting campaign ``counts`` (its own
    counters dropped), and notes for the user."""
    combined = combine_sources(experiment, read_experiment(counts), time_metric=time_metric)
    return combined.experiment, list(combined.notes)


@dataclass(frozen=True)
class ModelRequest:
    """One modeling job, as ``perfcast model`` and ``perfcast report`` describe it.

    Attributes:
        experiment: the measurements, as read (``--runs`` and ``--scaling`` applied).
        store: the campaign store they were read from (``None``: another format). Its
            taint profile and counting pass beside it are used as if named
            (:func:`campaign_files`), each where ``priors`` is ``None`` or names its source:
            ``--priors effort`` on a store models what the default does when the counts
            are there, and ``--priors none`` ignores them. What the store knows of its
            machine (shared cores, a simulated platform) goes into the notes and the
            provenance.
        priors: the prior sources to use (``--priors``); ``None`` chooses them
            (:func:`choose_priors`).
        inputs: the prior sources' files the user named.
        counts: a counting campaign whose exact counts join the time (``--effort-counts``).
        metrics: the metrics the user asked for (``--metric``; ``None``: every one).
        callpaths: the call paths to model (``None``: every one).
        runs: which of the store's runs the models rest on (``--runs``).
    """

    experiment: Experiment
    store: Path | None = None
    priors: tuple[str, ...] | None = None
    inputs: PriorInputs = PriorInputs()
    counts: Path | None = None
    metrics: tuple[str, ...] | None = None
    callpaths: tuple[str, ...] | None = None
    runs: str | None = None


@dataclass(frozen=True)
class CampaignModels:
    """What :func:`model_campaign` returns: what ``perfcast model`` prints and saves.

    Attributes:
        models: the models, their provenance attached.
        experiment: the measurements modeled (the counts joined, restricted to the
            metrics and call paths modeled).
        priors: the prior sources used, in precedence order (empty: black-box).
        inputs: the prior sources' files used, the store's own included.
        counts: the counting campaign whose counts were joined, or ``None``.
        notes: one line each, for the user, in the order the stages made them.
        report: the side-by-side report of the fixed priors, or ``None``.
        fit: the priors stage's whole result (the black-box models among it).
    """

    models: ModelSet
    experiment: Experiment
    priors: tuple[str, ...]
    inputs: PriorInputs
    counts: Path | None
    notes: tuple[str, ...]
    report: str | None
    fit: PriorFit


def check_counts(counts: Path | None, priors: Sequence[str] | None) -> None:
    """Refuse counts of a counting campaign where the priors asked for leave effort out
    (before anything is read: the CLI calls it first)."""
    if counts is not None and priors is not None and "effort" not in priors:
        raise InputError(
            "--effort-counts gives the counts of effort priors: add effort to --priors",
            path=counts,
        )


def model_campaign(request: ModelRequest, effort: EffortModeler | None = None) -> CampaignModels:
    """The models ``perfcast model`` gives for ``request``, fitted with ``effort`` (its
    ``modeler`` the search; default: :class:`~perfcast.effort.EffortModeler`'s)."""
    effort = effort_for(effort or EffortModeler(), request.metrics)
    inputs, counts = request.inputs, request.counts
    if request.store is not None:
        taint, beside_counts = campaign_files(request.store)
        named = request.priors
        if named is None or "taint" in named:
            inputs = replace(inputs, taint=inputs.taint or taint)
        if named is None or "effort" in named:
            counts = counts or beside_counts
    check_counts(counts, request.priors)
    measured = request.experiment
    experiment, notes = measured, list[str]()
    if counts is not None:
        experiment, notes = with_counts(measured, counts, effort.time_metric)
    priors, chosen = choose_priors(experiment, request.priors, inputs)
    notes += chosen
    metrics = modeled_metrics(request.metrics, experiment, priors)
    experiment = experiment.restricted(callpaths=request.callpaths, metrics=metrics)
    machine = None
    if request.store is not None:
        from perfcast.measure.machine import machine_of  # stores only: the measure stage

        machine = machine_of(request.store, request.runs, effort_priors="effort" in priors)
        notes += machine.notes
    result = fit_models(experiment, effort, priors, inputs)
    notes += result.notes
    # the ranges of what was measured, not of the counts joined from another campaign
    timed = measured.restricted(callpaths=request.callpaths)
    if machine is not None:
        provenance = machine.provenance(timed, result.models)
        notes += machine.overhead_notes(timed, provenance)
    else:
        provenance = Provenance(timed.ranges())
    # the store's notes above already named its compiler and platform, with its counts
    notes += [note.text for note in shared_cores_notes(provenance)]
    return CampaignModels(
        result.models.with_provenance(provenance),
        experiment,
        priors,
        inputs,
        counts,
        tuple(notes),
        result.report,
        result.fit,
    )
