"""The counting pass: a campaign's exact counts, measured with it instead of by hand.

Effort priors (``noise-resilient-priors.txt``) take each time model's lead term from exact
counts of the same program: basic blocks, MPI bytes, visits. Counting every basic block
costs time (SanitizerCoverage calls into perfcast at each block, up to 3.4x native
unfiltered), so time and counts come from two builds: the campaign's light build, run
with its repetitions, and the same build with ``--counters``, run once per point (counts
are deterministic; a second repetition repeats them). :func:`perfcast.measure.campaign.measure`
runs the second after the first, into ``app.counts.sqlite`` beside the store
(:data:`~perfcast.appspec.COUNTS_SUFFIX`), where ``perfcast model`` finds it without a flag.

**Where the counting build goes.** A make project writes its objects and program into its
own tree: a second build there finds them up to date (every count missing) or replaces the
user's program with the counting one. The counting build runs in ``app.counting/`` beside
the store (:data:`COPY_SUFFIX`), a copy of the app directory without version-control
data, the campaign's own files, object files and the program; its runs start there, so
the run command's relative paths (``./app``, input files) find the copy's.

**When there is none.** The spec's build already counts (``counters = true``: one campaign
has both), ``[build] counting_pass = false``, perfcast does not build the program (no
``[build]``), the campaign runs on a virtual cluster (``--backend smpi``), the app
directory holds more than :data:`MAX_COPY_BYTES`, or the store is itself a counting store.
Each case but the first two says so, with the way to count by hand.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from perfcast.appspec import COUNTS_SUFFIX, AppSpec, beside, expand
from perfcast.errors import PerfcastError
from perfcast.experiment.metrics import COUNTER_METRICS, VISITS_METRIC
from perfcast.measure.design import ExperimentPlan
from perfcast.measure.store import OK, CampaignStore

COPY_SUFFIX = ".counting"
"""The copy of the app directory the counting build writes into: ``app.counting/``."""

MAX_COPY_BYTES = 1 << 30
"""Largest app directory the counting pass copies (1 GiB): sources and build files are far
smaller; a directory this large holds input data, and copying it for every campaign would
cost more disk than the counts are worth."""

UNCOPIED = frozenset({".git", ".hg", ".svn", "__pycache__"})
"""Directory entries never copied: version control and Python caches."""

OBJECT_SUFFIXES = (".o", ".obj")
"""Objects of the light build, removed from the copy so that make rebuilds them counting."""

BY_HAND = (
    "to count by hand, measure a copy of the spec with [build] counters = true and "
    "[run] repetitions = 1 into --store {store}"
)


def counting_store(store: Path) -> Path:
    """``app.counts.sqlite`` beside the campaign store ``app.sqlite``."""
    return beside(store, COUNTS_SUFFIX)


def counting_directory(store: Path) -> Path:
    """``app.counting/`` beside the campaign store: where the counting build and runs go."""
    return store.absolute().with_name(store.stem + COPY_SUFFIX)


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
    size = _copied_bytes(spec.directory, _own_files(store))
    if size > MAX_COPY_BYTES:
        return (
            f"the app directory {spec.directory} holds {size / 2**30:.1f} GiB, more than the "
            f"{MAX_COPY_BYTES / 2**30:.0f} GiB the counting build copies; {hand}"
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
    return replace(plan, repetitions=1)


def copy_app(spec: AppSpec, store: Path) -> Path:
    """A fresh copy of the app directory for the counting build (module docstring): the
    light build's objects and program left out, so that the counting build makes its own."""
    target = counting_directory(store)
    if target.exists():
        shutil.rmtree(target)
    own = _own_files(store)

    def ignored(directory: str, names: list[str]) -> set[str]:
        return {name for name in names if _left_out(Path(directory, name), own)}

    try:
        shutil.copytree(spec.directory, target, symlinks=True, ignore=ignored)
    except (OSError, shutil.Error) as exc:
        raise PerfcastError(
            f"cannot copy {spec.directory} to {target} for the counting build: {exc}"
        ) from None
    for program in _programs(spec):
        built = target / program
        if built.is_file() and not built.is_symlink():
            built.unlink()
    return target


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


STORE_COMPANIONS = ("", ".lock", ".runs", "-journal", "-wal", "-shm")
"""What a store ``app.sqlite`` has beside it: its lock, its runs' scratch directory and
SQLite's journal files."""


def _own_files(store: Path) -> set[Path]:
    """The campaign's files that may lie in the app directory: both stores with their
    companions, and the copy itself."""
    own = {counting_directory(store)}
    for base in (store.absolute(), counting_store(store).absolute()):
        own |= {base.with_name(base.name + suffix) for suffix in STORE_COMPANIONS}
    return own


def _programs(spec: AppSpec) -> Iterator[str]:
    """Relative paths of the program the build writes and the run command starts."""
    assert spec.build is not None
    if spec.build.output:
        yield spec.build.output
    example = {p.name: p.values[0] for p in spec.parameters}
    try:
        argv = shlex.split(expand(spec.run.command, example))
    except ValueError:
        return
    if argv and not os.path.isabs(argv[0]) and "/" in argv[0]:
        yield argv[0]


def _left_out(path: Path, own: set[Path]) -> bool:
    """Is ``path`` left out of the copy: version control and caches (:data:`UNCOPIED`),
    the light build's objects, or one of the campaign's own files (``own``)?"""
    return path.name in UNCOPIED or path.name.endswith(OBJECT_SUFFIXES) or path.absolute() in own


def _copied_bytes(directory: Path, own: Iterable[Path]) -> int:
    """Bytes :func:`copy_app` would copy (stops counting past :data:`MAX_COPY_BYTES`)."""
    skipped = set(own)
    total = 0
    for root, directories, files in os.walk(directory):
        directories[:] = [d for d in directories if not _left_out(Path(root, d), skipped)]
        for name in files:
            path = Path(root, name)
            if _left_out(path, skipped):
                continue
            try:
                total += path.lstat().st_size
            except OSError:
                continue
            if total > MAX_COPY_BYTES:
                return total
    return total
