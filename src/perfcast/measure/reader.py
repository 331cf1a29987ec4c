"""Campaign stores (``perfcast measure``'s SQLite file) as an Experiment: the ``sqlite`` format.

The reader lives with the stage that writes the store and registers itself with the
format table the way a third-party reader would: ``pyproject.toml`` declares
:data:`FORMAT` in the ``perfcast.readers`` entry-point group
(:data:`perfcast.experiment.io.registry.READERS_GROUP`). So the experiment package never
imports the measure stage, and ``perfcast model store.sqlite`` still detects the format.

Every successful run contributes its per-rank profiles, parsed straight from the blobs
in the store (:mod:`perfcast.measure.profiles`: per call path, the mean and the maximum
over ranks); runs at the same point are repetitions. The experiment's parameters are the
campaign's parameters that take more than one value among the stored runs — fixed ones
cannot be modeled. Failed runs are left out (``perfcast measure`` reports them), and so are
the runs of the other machine in a store holding real and virtual runs
(:mod:`perfcast.measure.virtual`).

A program run without perfcast's instrumentation leaves no profiles; such runs still give
one measurement, the run's wall time as perfcast saw it (launcher start-up included), as
metric :data:`RUN_TIME` at a call path named after the campaign. In a store whose other
runs have profiles, a run without them lost them: it is left out, named in a
:class:`LostProfilesWarning`.

Every value read from the store is checked (:meth:`perfcast.measure.store.CampaignStore.runs`,
:func:`perfcast.measure.profiles.parse_rank_profile`): a store changed by something other
than perfcast is refused with the run and, for a profile, the line at fault.

If the campaign's spec lists ``[metrics] collect``, only those metrics are read (a name
also selects its ``:max`` twin). A collected metric the runs do not have (``cpu_time`` of
runs measured without ``PERFCAST_CPU_TIME=1``) is a note (:class:`MissingMetricWarning`), not
an error: what the runs have is read, so ``--metric time`` and ``--effort-counts`` still work.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from perfcast.errors import InputError
from perfcast.experiment.experiment import METRIC, Experiment, Metric, Row
from perfcast.experiment.io.registry import CAMPAIGN_STORE, Format
from perfcast.experiment.metrics import base_metric
from perfcast.inputs import decode_text
from perfcast.measure.profiles import (
    PROFILE_HINT,
    PROFILE_KIND,
    RankProfile,
    combine_runs,
    parse_rank_profile,
)
from perfcast.measure.store import OK, CampaignStore, StoredRun
from perfcast.measure.virtual import select_runs

RUN_TIME = Metric("run_time", "s")
"""Wall time of a whole run, for programs that write no profiles."""

SQLITE_MAGIC = "SQLite format 3"


class MissingMetricWarning(UserWarning):
    """A metric the campaign declares in ``[metrics] collect`` is in none of its runs."""


def read_sqlite(path: str | Path, runs: str | None = None) -> Experiment:
    """Read a campaign store's successful runs of one machine into an Experiment: ``runs``
    is ``real``, ``virtual`` or a platform's name (:func:`perfcast.measure.virtual.select_runs`;
    None: the real runs, or the virtual runs of a store that has only those)."""
    path = Path(path)
    with CampaignStore.open(path) as store:
        info = store.info()
        stored = store.runs(OK)
        if not stored:
            failed = store.counts()["failed"]
            raise InputError(
                f"the campaign has no successful run yet ({failed} failed); run "
                "`perfcast measure` (with --resume) first",
                path=path,
            )
        selected = select_runs(stored, runs, path).runs
        for run in selected:
            absent = [name for name in info.parameters if name not in run.point]
            if absent:
                raise InputError(
                    f"run {run.key!r} has no value of the campaign's parameter(s) "
                    f"{', '.join(absent)}: the store was changed by something other than "
                    "perfcast; measure the campaign into a fresh store",
                    path=path,
                )
        parameters = [
            name for name in info.parameters if len({run.point[name] for run in selected}) > 1
        ]
        profiled: list[tuple[dict[str, float], list[RankProfile]]] = []
        unprofiled: list[StoredRun] = []
        for run in selected:
            blobs = store.profiles(run.id)
            if not blobs:
                unprofiled.append(run)
                continue
            point = {name: run.point[name] for name in parameters}
            profiles = []
            for name, data in sorted(blobs.items()):
                source = f"{path}[{run.key}]/{name}"
                profiles.append(
                    parse_rank_profile(
                        decode_text(data, source, PROFILE_KIND, PROFILE_HINT), source
                    )
                )
            profiled.append((point, profiles))
    if profiled and unprofiled:
        _warn_lost_profiles(path, unprofiled)
        unprofiled = []
    parts = []
    if profiled:
        parts.append(combine_runs(profiled))
    if unprofiled:
        parts.append(_run_times(info.name, parameters, unprofiled, str(path)))
    experiment = parts[0] if len(parts) == 1 else Experiment.concat(parts)
    experiment.source = str(path)
    if info.metrics:
        wanted = set(info.metrics)
        present = set(experiment.data[METRIC])
        keep = [
            m
            for m in experiment.metrics
            if m in present and (m in wanted or base_metric(m) in wanted)
        ]
        absent = [m for m in info.metrics if base_metric(m) not in present]
        if absent:
            reading = "the others" if keep else f"all they have ({', '.join(sorted(present))})"
            warnings.warn(
                f"{path}: the campaign collects {', '.join(absent)}, but its runs do not have "
                f"{'it' if len(absent) == 1 else 'them'}; reading {reading}",
                MissingMetricWarning,
                stacklevel=2,
            )
        if keep:
            experiment = experiment.restricted(metrics=keep)
    return experiment


class LostProfilesWarning(UserWarning):
    """Runs of an instrumented program that have no profiles in the store: left out."""


SHOWN_RUNS = 5
"""How many runs a warning names; the rest are counted."""


def _warn_lost_profiles(path: Path, runs: list[StoredRun]) -> None:
    """Runs without profiles in a store whose other runs have them are left out, named.

    Their program is instrumented, so their profiles were lost (the store was changed by
    something else): their run time alone is not the experiment's metrics, and mixing the
    two would model a call path named after the campaign on some points only.
    """
    keys = ", ".join(repr(run.key) for run in runs[:SHOWN_RUNS])
    more = f" and {len(runs) - SHOWN_RUNS} more" if len(runs) > SHOWN_RUNS else ""
    warnings.warn(
        f"{path}: {len(runs)} run(s) have no profiles although the campaign's other runs do "
        f"({keys}{more}); they are left out of the model (measure the campaign into a fresh "
        "store to have them)",
        LostProfilesWarning,
        stacklevel=3,
    )


def _run_times(name: str, parameters: list[str], runs: list[StoredRun], source: str) -> Experiment:
    rows: list[Row] = [
        (name, RUN_TIME.name, [run.point[p] for p in parameters], run.seconds or 0.0)
        for run in runs
    ]
    return Experiment.from_rows(parameters, rows, [RUN_TIME], source=source)


def looks_like_sqlite(first_line: str) -> bool:
    return first_line.startswith(SQLITE_MAGIC)


FORMAT = Format(
    name=CAMPAIGN_STORE,
    summary="perfcast campaign store (SQLite, written by perfcast measure)",
    reader=read_sqlite,
    suffixes=(".sqlite", ".sqlite3", ".db"),
    sniff=looks_like_sqlite,
)
