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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from perfcast.experiment.experiment import Experiment
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

    def provenance(self, experiment: Experiment, models: ModelSet) -> Provenance:
        """What ``perfcast predict`` needs to know of the measurements: each parameter's
        measured range, the fitted models that rest on wall time of runs with more ranks
        than cores, and the simulated platform."""
        ranges = experiment.ranges()
        if self.shared is None:
            return Provenance(ranges, platform=self.platform, compilers=self.compilers)
        on_shared_cores = shared_core_models(experiment, self.shared)
        fitted = {(model.callpath, model.metric) for model in models}
        shared = replace(on_shared_cores, models=on_shared_cores.models & fitted)
        return Provenance(ranges, shared, self.platform, self.compilers)


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
    return Machine(shared, platform, tuple(notes), compilers)
