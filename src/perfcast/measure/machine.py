"""What a campaign store knows of the machine behind the runs a model rests on.

Two facts decide how far a store's models can be trusted, and every stage that fits models
from a store (``perfcast model``, ``perfcast report``) states them the same way and writes
them into the model set's provenance for ``perfcast predict``:

- runs with more ranks than cores (:mod:`.oversubscription`): their wall time is partly
  waiting for a core;
- runs on a virtual cluster (:mod:`.virtual`): their times describe a platform file's
  machine, and real and virtual runs of one store are kept apart.

A third fact says which program was measured: the compiler that built it (clang-16, for
XRay) and the one the user's own build runs (the store's ``builds`` table), so that a
model of a clang build is never taken for one of the user's gcc build unawares.

A fourth says what the instrumentation cost: the calibration ``perfcast measure`` keeps
beside the store (:mod:`.overhead`) against the runs' visits and times, naming the call
paths whose time is mostly perfcast's own and estimating the campaign's overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from perfcast.experiment.experiment import Experiment
from perfcast.experiment.names import name_list
from perfcast.measure.overhead import (
    DOMINATED_SHARE,
    Calibration,
    calibration_path,
    campaign_note,
    instrumentation_cost,
    read_calibration,
)
from perfcast.measure.oversubscription import (
    Oversubscription,
    oversubscription_of,
    shared_core_models,
)
from perfcast.measure.store import open_store
from perfcast.measure.virtual import selection
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.provenance import Compilers, Provenance, SimulatedPlatform


@dataclass(frozen=True)
class Machine:
    """The machine facts of the runs one model set is fitted to."""

    shared: Oversubscription | None
    """Runs with more ranks than cores (None: none)."""
    platform: SimulatedPlatform | None
    """The simulated platform (None: real runs)."""
    notes: tuple[str, ...]
    """What to tell the user, one sentence each."""
    compilers: Compilers | None = None
    """The compilers of the campaign's latest build (None: the store recorded none)."""
    calibration: Calibration | None = None
    """The instrumentation's cost per call beside the store (None: no calibration)."""

    def provenance(self, experiment: Experiment, models: ModelSet) -> Provenance:
        """What ``perfcast predict`` needs to know of the measurements: each parameter's
        measured range, the fitted models that rest on wall time of runs with more ranks
        than cores, and the simulated platform."""
        ranges = experiment.ranges()
        cost = None
        if self.calibration is not None:
            cost = instrumentation_cost(experiment, self.calibration)
        shared = None
        if self.shared is not None:
            on_shared_cores = shared_core_models(experiment, self.shared)
            fitted = {(model.callpath, model.metric) for model in models}
            shared = replace(on_shared_cores, models=on_shared_cores.models & fitted)
        return Provenance(ranges, shared, self.platform, self.compilers, cost)

    def overhead_notes(self, experiment: Experiment, provenance: Provenance) -> list[str]:
        """The campaign's estimated overhead, and the call paths whose time is mostly
        instrumentation (:mod:`.overhead`)."""
        cost = provenance.instrumentation
        if self.calibration is None or cost is None:
            return []
        notes = [note for note in [campaign_note(experiment, self.calibration)] if note]
        if cost.dominated:
            paths = sorted(cost.dominated, key=lambda path: -cost.dominated[path])
            notes.append(
                f"instrumentation dominates {len(paths)} call path(s): their visits x "
                f"{cost.per_call_ns:.3g} ns per call are at least "
                f"{100 * DOMINATED_SHARE:.0f} % of their measured own time, so the summary "
                f"lists them apart: {name_list(paths)}"
            )
        return notes


def machine_of(store: Path, which: str | None = None, *, effort_priors: bool = False) -> Machine:
    """The facts of the store's runs of one machine (``which``:
    :func:`perfcast.measure.virtual.select_runs`); ``effort_priors`` adds what shared cores
    mean for them to the note."""
    notes = []
    chosen = selection(store, which)
    shared = oversubscription_of(chosen.runs)
    if shared is not None:
        notes.append(shared.describe(store, effort_priors=effort_priors))
    kept_apart = chosen.note(store)
    if kept_apart is not None:
        notes.append(kept_apart)
    platform = None
    if chosen.platform is not None:
        platform = SimulatedPlatform(chosen.platform.name, chosen.platform.file)
    with open_store(store) as opened:
        builds = opened.builds()
    compilers = None
    if builds:
        latest = builds[-1]
        compilers = Compilers(latest.measured, latest.user)
        if compilers.differ:
            notes.append(f"{store}: {compilers.describe(latest.program)}")
    calibration = None
    if platform is None and calibration_path(store).is_file():
        calibration = read_calibration(calibration_path(store))
    return Machine(shared, platform, tuple(notes), compilers, calibration)
