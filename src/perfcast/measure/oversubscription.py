"""Runs with more ranks than cores, and what that does to what they measured.

When a run has more MPI ranks than cores (``mpirun --oversubscribe`` on a small machine),
the ranks take turns on the cores. Wall time per unit of work grows with ranks/cores, and
MPI time most of all: a collective waits for the time slices of every descheduled rank, so
what is measured as communication is scheduling. On the 2-core machine of the noise study
(``benchmarks/results/noise_study.txt``), wall time per counted basic block grew 1.5x to
4.0x from 3 to 6 ranks, and MPI time per byte sent 15x from 2 to 3 ranks. Models of such
times describe the machine's scheduler, not the program — and the MPI laws behind effort
priors (``noise-resilient-priors.txt`` Table I) assume one rank per core. The thread CPU time
of computation (``PERFCAST_CPU_TIME=1``) stays true, since a waiting rank uses none.

Every stored run keeps its ranks and the cores it had (``runs.ranks``/``runs.cores``, from
:meth:`~perfcast.measure.runner.Backend.cores_for`). :func:`plan_note` warns before a
campaign runs; :func:`oversubscription` finds such runs in a store, for ``perfcast model``,
which names the models fitted on their wall time (:func:`shared_core_models`) and records
them in the model file, so that ``perfcast predict`` can say so next to each prediction
(:func:`perfcast.modeling.provenance.models_note`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.appspec import RANKS
from perfcast.experiment.experiment import CALLPATH, METRIC, Experiment, Metric
from perfcast.experiment.metrics import CPU_TIME_METRIC
from perfcast.measure.store import OK, StoredRun, open_store
from perfcast.measure.virtual import select_runs
from perfcast.modeling.provenance import SharedCores, core_count, rank_counts, ranks_on_cores

CONSEQUENCE = (
    "time at those points includes waiting for a core, MPI time most (a collective waits "
    "for every descheduled rank)"
)
REMEDY = (
    "the CPU time of computation stays usable (metric cpu_time, measured with "
    "PERFCAST_CPU_TIME=1); for communication, measure where each rank has a core of its "
    "own (e.g. --backend slurm)"
)
EFFORT_CAVEAT = (
    "the MPI laws of --priors effort (Table I) assume one rank per core: fitted to these "
    "runs, their coefficients measure the waiting, not the network"
)


def plan_note(ranks: Iterable[int], cores_for: Callable[[int], int | None]) -> str | None:
    """The warning for a plan whose rank counts exceed the cores a run will have (None: every
    run fits, or the backend cannot tell). ``cores_for`` is the backend's
    :meth:`~perfcast.measure.runner.Backend.cores_for`."""
    over: dict[int, set[int]] = {}
    for count in set(ranks):
        cores = cores_for(count)
        if cores is not None and count > cores:
            over.setdefault(cores, set()).add(count)
    if not over:
        return None
    if len(over) == 1:
        ((cores, counts),) = over.items()
        where = f"{rank_counts(counts)}: more ranks than the {core_count(cores)} a run has here"
    else:
        where = f"more ranks than cores a run has here ({ranks_on_cores(over)})"
    return f"{where}, so ranks take turns on them: {CONSEQUENCE}. {_capital(REMEDY)}"


@dataclass(frozen=True)
class Oversubscription:
    """The successful runs of a campaign store that had more ranks than cores."""

    runs: int
    """How many such runs."""
    stored: int
    """Successful runs in the store."""
    ranks_on: dict[int, tuple[int, ...]]
    """Cores -> the rank counts above them that ran on that many cores."""
    unknown: int = 0
    """Successful runs stored without their ranks and cores (by schema version 1)."""

    def describe(self, store: str | Path, *, effort_priors: bool = False) -> str:
        """The note ``perfcast model`` prints; ``effort_priors`` adds what it means for them."""
        unknown = (
            f"; {self.unknown} {'run' if self.unknown == 1 else 'runs'}, stored before perfcast "
            "recorded cores, may too"
            if self.unknown
            else ""
        )
        text = (
            f"{self.runs} of {self.stored} runs in {store} had more ranks than cores "
            f"({ranks_on_cores(self.ranks_on)}{unknown}): {CONSEQUENCE}. {_capital(REMEDY)}"
        )
        if effort_priors:
            text += f". {_capital(EFFORT_CAVEAT)}"
        return text


def oversubscription(store_path: str | Path, which: str | None = None) -> Oversubscription | None:
    """The successful runs of a store that had more ranks than cores (None: no such run;
    runs whose cores are unknown — stored before perfcast kept them — are only counted),
    among the runs of one machine as the store's reader selects them (``which``:
    :func:`perfcast.measure.virtual.select_runs`)."""
    with open_store(store_path) as store:
        stored = store.runs(OK)
    return oversubscription_of(select_runs(stored, which, Path(store_path)).runs if stored else ())


def oversubscription_of(runs: Sequence[StoredRun]) -> Oversubscription | None:
    """:func:`oversubscription` of runs already read and selected."""
    over = [
        (run.ranks, run.cores)
        for run in runs
        if run.ranks is not None and run.cores is not None and run.ranks > run.cores
    ]
    if not over:
        return None
    ranks_on: dict[int, set[int]] = {}
    for ranks, cores in over:
        ranks_on.setdefault(cores, set()).add(ranks)
    return Oversubscription(
        runs=len(over),
        stored=len(runs),
        ranks_on={cores: tuple(sorted(counts)) for cores, counts in sorted(ranks_on.items())},
        unknown=sum(1 for run in runs if run.ranks is None or run.cores is None),
    )


def is_wall_time(metric: Metric) -> bool:
    """Whether waiting for a core counts in ``metric``: every time in seconds but the
    thread CPU time (``cpu_time``, ``cpu_time_inclusive`` and their ``:max``)."""
    return metric.unit == "s" and not metric.name.startswith(CPU_TIME_METRIC)


def shared_core_models(
    experiment: Experiment, shared: Oversubscription, ranks_parameter: str = RANKS
) -> SharedCores:
    """The (call path, metric) pairs of ``experiment`` whose wall time was measured, at
    least in part, by runs with more ranks than cores. When the ranks are not a parameter
    of the experiment, every run had the same rank count, so all of them shared cores."""
    wall = [name for name, metric in experiment.metrics.items() if is_wall_time(metric)]
    rows = experiment.data[experiment.data[METRIC].isin(wall)]
    if ranks_parameter in experiment.parameters:
        counts = {ranks for over in shared.ranks_on.values() for ranks in over}
        rows = rows[rows[ranks_parameter].isin(counts)]
    pairs = rows[[CALLPATH, METRIC]].drop_duplicates().itertuples(index=False)
    return SharedCores(
        ranks_parameter=ranks_parameter,
        ranks_on=dict(shared.ranks_on),
        models=frozenset((str(callpath), str(metric)) for callpath, metric in pairs),
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
