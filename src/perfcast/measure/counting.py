"""The counting pass: a campaign's exact counts, measured with it instead of by hand.

Effort priors (``noise-resilient-priors.txt``) take each time model's lead term from exact
counts of the same program: basic blocks, MPI bytes, visits. Counting every basic block
costs time (SanitizerCoverage calls into perfcast at each block, up to 3.4x native
unfiltered), so time and counts come from two builds: the campaign's light build, run
with its repetitions, and the same build with ``--counters``, run once per point (counts
are deterministic; a second repetition repeats them). :func:`perfcast.measure.campaign.measure`
runs the second after the first, into ``app.counts.sqlite`` beside the store
(:data:`~perfcast.appspec.COUNTS_SUFFIX`), where ``perfcast model`` finds it without a flag.

**Where the counting build goes.** In ``app.counting/`` beside the store, a copy of the app
directory that perfcast owns (:mod:`~perfcast.measure.copies`): a make project's second
build in its own tree finds its objects and program up to date (every count missing) or
replaces the user's program with the counting one. Its runs start in the copy.

**When there is none.** The spec's build already counts (``counters = true``: one campaign
has both), ``[build] counting_pass = false``, perfcast does not build the program (no
``[build]``), the campaign runs on a virtual cluster (``--backend smpi``), the app
directory holds more than :data:`~perfcast.measure.copies.MAX_COPY_BYTES`, or the store
is itself a counting store. Each case but the first two says so, with the way to count by
hand.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from perfcast.appspec import COUNTS_SUFFIX, AppSpec, beside
from perfcast.experiment.metrics import COUNTER_METRICS, VISITS_METRIC
from perfcast.measure import copies
from perfcast.measure.design import ExperimentPlan
from perfcast.measure.store import OK, CampaignStore

BY_HAND = (
    "to count by hand, measure a copy of the spec with [build] counters = true and "
    "[run] repetitions = 1 into --store {store}"
)


def counting_store(store: Path) -> Path:
    """``app.counts.sqlite`` beside the campaign store ``app.sqlite``."""
    return beside(store, COUNTS_SUFFIX)


def counting_directory(store: Path) -> Path:
    """``app.counting/`` beside the campaign store: where the counting build and runs go."""
    return copies.copy_directory(store, copies.COUNTING)


def skip_reason(spec: AppSpec, store: Path, *, virtual: bool) -> str | None:
    """Why this campaign gets no counting pass that the user should hear about, or ``""``
    where there is nothing to say (the build counts itself, the spec turned it off, the
    store is a counting store), or ``None``: the pass runs."""
    build = spec.build
    if store.name.endswith(COUNTS_SUFFIX) or (build is not None and build.counters):
        return ""
    if build is not None and not build.counting_pass:
        return ""
    hand = BY_HAND.format(store=counting_store(store))
    if build is None:
        return f"perfcast does not build the program (no [build] table) and cannot count it; {hand}"
    if virtual:
        return (
            "a virtual cluster's runs are simulated, and counts of the program are the same "
            f"on any machine: {hand} on the local backend"
        )
    size = copies.copied_bytes(spec.directory, store)
    if size > copies.MAX_COPY_BYTES:
        return (
            f"the app directory {spec.directory} holds {size / 2**30:.1f} GiB, more than the "
            f"{copies.MAX_COPY_BYTES / 2**30:.0f} GiB the counting build copies; {hand}"
        )
    return None


def counting_spec(spec: AppSpec, store: Path) -> AppSpec:
    """The spec of the counting pass: the same build with counters, in the copy, once per
    point, into :func:`counting_store`, collecting the counters and visits besides what the
    spec's ``[metrics] collect`` names."""
    assert spec.build is not None
    counted = (*COUNTER_METRICS, VISITS_METRIC)
    # a [metrics] collect list names what the timing runs keep, not the counts
    metrics = (*spec.metrics, *(m for m in counted if m not in spec.metrics))
    return replace(
        spec,
        directory=counting_directory(store),
        store=counting_store(store),
        build=replace(spec.build, counters=True),
        run=replace(spec.run, repetitions=1),
        metrics=metrics if spec.metrics else (),
    )


def counting_plan(plan: ExperimentPlan) -> ExperimentPlan:
    """The campaign's points, once each."""
    return replace(plan, repetitions=1, point_repetitions=())


def cost_note(light: Path, counts: Path) -> str | None:
    """The counting pass's cost against one repetition of the timing campaign, from the
    run times both stores hold (``None`` where either has no timed run)."""
    counted = _seconds_per_point(counts)
    timed = _seconds_per_point(light)
    shared = sorted(set(counted) & set(timed))
    if not shared:
        return None
    spent = sum(counted[point] for point in shared)
    one_repetition = sum(timed[point] for point in shared)
    return (
        f"counting pass: {len(shared)} runs, {spent:.3g} s, {spent / one_repetition:.2g}x one "
        f"repetition of the timing runs at the same points ({one_repetition:.3g} s); its time "
        "is not modeled, its counts fix the time models' terms"
    )


def _seconds_per_point(store: Path) -> dict[tuple[tuple[str, float], ...], float]:
    """Median seconds of the successful runs at each point of ``store``."""
    with CampaignStore.open(store) as opened:
        runs = opened.runs(OK)
    by_point: dict[tuple[tuple[str, float], ...], list[float]] = {}
    for run in runs:
        if run.seconds is not None:
            by_point.setdefault(tuple(sorted(run.point.items())), []).append(run.seconds)
    return {point: sorted(s)[len(s) // 2] for point, s in by_point.items()}
