"""The report job: what ``perfcast report`` (and ``perfcast demo``'s page) draws for one input.

A report shows the models a user gets by default, so for measurements it fits them with
the modeling workflow (:func:`~perfcast.workflows.model.model_campaign`: the same priors,
the same notes as ``perfcast model``) and puts beside each model fitted under a prior the
black-box model of the same measurements, where the reader sees what the prior decided.
Given a model file instead, it draws that file as saved, with the provenance notes every
reader of it must see (the wording ``perfcast predict`` uses). The command prints the
notes of the result and writes the page; a library user gets the same
:class:`~perfcast.report.page.ReportInputs` from :func:`report_inputs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.effort.priors import EffortModeler
from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.provenance import Provenance, provenance_notes
from perfcast.report.campaign import campaign_facts
from perfcast.report.page import ReportInputs
from perfcast.workflows.model import CampaignModels, ModelRequest, PriorInputs, model_campaign


@dataclass(frozen=True)
class ReportRequest:
    """One report's input.

    Attributes:
        source: what the user named: a campaign store, a measurement file or profiles
            (then ``experiment`` holds what was read from it), or a model file (then
            ``experiment`` is ``None`` and the file is drawn as saved).
        experiment: the measurements read from ``source``, or ``None`` for a model file.
        store: whether ``source`` is a campaign store (its campaign facts, its counting
            store and taint profile beside it, its machine's notes).
        models: a model file to draw against the measurements instead of fitting them.
        taint: a taint profile: its priors in the fit and its verdicts on the page.
        metrics: the metrics to model (``None``: every one measured).
    """

    source: Path
    experiment: Experiment | None = None
    store: bool = False
    models: Path | None = None
    taint: Path | None = None
    metrics: tuple[str, ...] | None = None


def report_inputs(request: ReportRequest, effort: EffortModeler | None = None) -> ReportInputs:
    """What the report of ``request`` is made of; its ``notes`` are the user's to read.

    ``effort`` fits as ``perfcast model`` would with the same options (its ranks
    parameter); the default is the modeler's defaults."""
    if request.experiment is None:
        return _of_model_file(request)
    if request.models is None:
        request_models = ModelRequest(
            request.experiment,
            store=request.source if request.store else None,
            inputs=PriorInputs(taint=request.taint),
            metrics=request.metrics,
        )
        return fitted_report(model_campaign(request_models, effort), request.source, request.store)
    return _of_given_models(request, request.experiment, request.models)


def fitted_report(
    fitted: CampaignModels, source: Path, store: bool, notes: Sequence[str] = ()
) -> ReportInputs:
    """The report of what the modeling workflow fitted to ``source``: its models, the
    black-box ones beside those a prior shaped, its notes (and ``notes`` after them)."""
    alternatives = fitted.fit.free if fitted.priors else None
    return _with_measurements(
        fitted.models,
        fitted.experiment,
        source,
        store,
        taint=fitted.inputs.taint,
        notes=(*fitted.notes, *notes),
        alternatives=alternatives,
    )


def _of_model_file(request: ReportRequest) -> ReportInputs:
    if request.models is not None:
        raise InputError(
            "is a model file already: give --models with a campaign store or measurement "
            "file as INPUT",
            path=request.source,
        )
    if request.taint is not None:
        raise InputError(
            "is a model file: --taint fits measurements with the profile's priors; give the "
            "campaign store or measurement file",
            path=request.source,
        )
    models = ModelSet.load(request.source)
    return ReportInputs(models, str(request.source), notes=_provenance_notes(models.provenance))


def _of_given_models(request: ReportRequest, experiment: Experiment, path: Path) -> ReportInputs:
    """A saved model file drawn against the measurements it was fitted to."""
    models = ModelSet.load(path)
    if models.parameters != experiment.parameters:
        raise InputError(
            f"has models over {', '.join(models.parameters)} but {request.source} measured "
            f"{', '.join(experiment.parameters)}: give the model file fitted to it",
            path=path,
        )
    notes: tuple[str, ...] = ()
    if request.store:
        from perfcast.measure.machine import machine_of

        notes = tuple(machine_of(request.source).notes)
    alternatives = None
    if any(model.prior for model in models):
        fitted = [m for m in models.metrics if m in experiment.metrics]
        alternatives = PMNFModeler().fit(experiment.restricted(metrics=fitted))
    return _with_measurements(
        models,
        experiment,
        request.source,
        request.store,
        taint=request.taint,
        # a model file's provenance speaks for itself; fitted here, the notes said it
        notes=(*notes, *_provenance_notes(models.provenance)),
        alternatives=alternatives,
    )


def _with_measurements(
    models: ModelSet,
    experiment: Experiment,
    source: Path,
    store: bool,
    *,
    taint: Path | None,
    notes: Sequence[str],
    alternatives: ModelSet | None,
) -> ReportInputs:
    """The inputs of a report over measurements: the taint profile's verdicts (and their
    notes) where one is given, the campaign's facts where ``source`` is a store."""
    taint_priors = None
    if taint is not None:
        from perfcast.report.taint import taint_priors as priors_of
        from perfcast.taint.profile_model import read_profile

        taint_priors = priors_of(read_profile(taint), experiment)
        notes = (*notes, *taint_priors.notes)
    return ReportInputs(
        models,
        str(source),
        experiment=experiment,
        campaign=campaign_facts(source) if store else None,
        notes=tuple(notes),
        alternatives=alternatives,
        taint=taint_priors,
    )


def _provenance_notes(provenance: Provenance | None) -> tuple[str, ...]:
    """What a model file's provenance says every reader must know."""
    return tuple(note.text for note in provenance_notes(provenance))
