"""Caliper profiles (``.cali``, or Caliper-JSON in cali-query's json-split form) with
Adiak metadata: one file per run, the run's parameters among its globals.

Caliper writes one profile per run (usually aggregated over the ranks by its SPOT or
``hatchet-region-profile`` configurations); Adiak records what the run was (``jobsize``,
``problem_size``, the compiler, the cluster) as the profile's *globals*. A set of such
files becomes one Experiment:

* **call paths** from Caliper's region nesting (a record's ``path``: ``main ->
  lulesh.cycle -> LagrangeLeapFrog``); records outside every region are left out;
* **parameters** from the globals the user names (``parameters=["jobsize",
  "problem_size"]``): a name no file has is an error listing the globals that exist, and
  those that vary across the runs, since only the user knows which of them is a parameter
  of the program and which a measured result (``elapsed_time``) or an alias
  (``mpi.world.size`` beside ``jobsize``);
* **metrics**: every value attribute the records carry. Caliper's time statistics over
  ranks get perfcast's names, so the summary, the priors and the report know them as time
  (:data:`TIME_NAMES`: ``avg#inclusive#sum#time.duration`` is ``time_inclusive``, its
  ``max#`` twin ``time_inclusive:max``); any other attribute keeps its Caliper name
  (``any#any#max#Flops/Rep``). Where the files carry only inclusive time, the exclusive
  ``time`` is derived per run: a region's inclusive mean over ranks less its children's
  (exact when every rank enters the same regions, as in an SPMD code);
* **repetitions**: several runs at one point.

Runs must differ only in the chosen parameters: two runs at one point that differ in
another setting (compiler, version, threads) would be averaged into noise, so that is an
error naming the setting and its values, to be chosen with ``where={"compiler":
"intel"}`` or added to the parameters. A setting that changes only together with the
parameters is reported as a warning: its effect cannot be told apart from theirs.
Globals that describe a run rather than configure it are not compared
(:data:`RUN_RECORD_GLOBALS`, Adiak dates, measured doubles, Caliper's own ``cali.*`` and
``spot.*``).

``.cali`` files are parsed by ``caliper-reader`` (LLNL's pure-Python reader, the one
hatchet and thicket use), imported only when a Caliper file is read. A file that is JSON is
read as json-split (:func:`_read_split_json`): named explicitly (``--format caliper``, since
Extra-P's JSON shares the extension), never found in a directory, which holds ``.cali``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR, recorded_callpath
from perfcast.experiment.experiment import Experiment, Metric, Row
from perfcast.experiment.io.registry import Format, require_regular_file
from perfcast.experiment.metrics import INCLUSIVE_SUFFIX, TIME_METRIC, with_max
from perfcast.experiment.points import format_point

CALIPER_PROFILES = "caliper"
"""The format's name (``--format caliper``), which the summary's wording asks for."""
SUFFIX = ".cali"
MAX_FILES = 100_000
"""The most profiles one set may hold: a bound checked before any file is parsed."""

TIME_INCLUSIVE = TIME_METRIC + INCLUSIVE_SUFFIX
TIME_NAMES = {
    # SPOT channel (``spot``, ``profile.mpi``): statistics over ranks of inclusive time
    "avg#inclusive#sum#time.duration": TIME_INCLUSIVE,
    "max#inclusive#sum#time.duration": with_max(TIME_INCLUSIVE),
    # hatchet-region-profile and runtime-report aggregated over ranks by cali-query
    "inclusive#sum#time.duration": TIME_INCLUSIVE,
    "sum#time.duration": TIME_METRIC,
    "avg#sum#time.duration": TIME_METRIC,
    "max#sum#time.duration": with_max(TIME_METRIC),
}
"""Caliper's time attributes named as perfcast names time; values are seconds."""

BOOKKEEPING_VALUES = ("aggregate.slot",)
"""Value attributes that are Caliper's own record keeping (node order), not measurements."""
BOOKKEEPING_COLUMNS = ("Node order",)
"""The same in json-split, where columns may carry their aliases."""
RANK_COLUMN = "mpi.rank"
SPLIT_TIME_NAMES = {"time (inc)": TIME_INCLUSIVE, "sum#avg#sum#time.duration": TIME_METRIC}
"""hatchet's spellings of Caliper's time in json-split (``time`` is already perfcast's)."""

RUN_RECORD_GLOBALS = frozenset({"user", "cmdline", "launchdate", "launchday", "libraries"})
"""Globals that say who ran and when, not what: never compared between runs."""
RECORD_ADIAK_TYPES = frozenset({"date", "timeval", "double"})
"""Adiak types of globals that record a run (when it started, what it measured:
``elapsed_time``, ``figure_of_merit``) rather than configure it, unless chosen as
parameters."""
CALIPER_PREFIXES = ("cali.", "spot.")

UNITS = {"sec": "s", "s": "s"}


@dataclass(frozen=True)
class RunSettings:
    """What one run was: its globals (Adiak metadata) by name, and the Adiak type of
    those that have one; ``label`` names the run in messages (its file)."""

    label: str
    globals: dict[str, str]
    types: dict[str, str]


@dataclass
class _Run:
    path: Path
    settings: RunSettings
    rows: list[tuple[str, str, float]] = field(default_factory=list)
    """(call path, metric, value)."""
    units: dict[str, str] = field(default_factory=dict)
    """perfcast's unit of each metric (Caliper's ``attribute.unit``)."""


def read_caliper(
    path: Path,
    parameters: Sequence[str] | str | None = None,
    where: Mapping[str, str] | Sequence[str] | None = None,
    more: Sequence[Path] = (),
) -> Experiment:
    """Read Caliper profiles into one Experiment (module docstring).

    ``path`` is a ``.cali`` file or a directory searched for them; ``more`` adds files or
    directories (``perfcast model a.cali b.cali``). ``parameters`` names the Adiak globals
    that are the runs' parameters (a list, or ``"jobsize,problem_size"``); ``where``
    keeps the runs whose globals have these values (``{"compiler": "intel"}`` or
    ``["compiler=intel"]``).
    """
    files = profile_files([path, *more])
    chosen = _names(parameters)
    wanted = _conditions(where)
    runs = [_read_run(file) for file in files]
    kept = [r for r in runs if all(r.settings.globals.get(k) == v for k, v in wanted.items())]
    if not kept:
        conditions = ", ".join(f"{k}={v}" for k, v in wanted.items())
        seen = _values_seen([r.settings for r in runs], wanted)
        raise InputError(f"no run has {conditions}; {seen}", path=path)
    settings = [run.settings for run in kept]
    if not chosen:
        raise InputError(
            "name the runs' parameters among their Adiak globals with --parameters "
            f"(parameters=[...]); {_globals_listing(settings)}",
            path=path,
        )
    coordinates = [_coordinate(run, chosen, settings) for run in settings]
    check_settings(settings, coordinates, chosen)
    metrics = {name: Metric(name, unit) for run in kept for name, unit in run.units.items()}

    def rows() -> Iterable[Row]:
        for run, coordinate in zip(kept, coordinates, strict=True):
            for callpath, metric, value in run.rows:
                yield callpath, metric, coordinate, value

    source = str(path) if not more else f"{path} and {len(more)} more"
    return Experiment.from_rows(chosen, rows(), metrics.values(), source=source)


def profile_files(paths: Sequence[Path]) -> list[Path]:
    """The ``.cali`` files of ``paths`` (files as given, directories searched), sorted
    within each directory; bounded by :data:`MAX_FILES` before any is parsed."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found: list[Path] = []
            for root, _dirs, names in os.walk(path):
                found.extend(Path(root) / name for name in names if name.endswith(SUFFIX))
                if len(files) + len(found) > MAX_FILES:
                    break
            if not found:
                raise InputError(f"no Caliper profile (*{SUFFIX}) in this directory", path=path)
            files.extend(sorted(found))
        elif path.exists():
            files.append(path)
        else:
            raise InputError("no such Caliper profile", path=path)
        if len(files) > MAX_FILES:
            raise InputError(
                f"more than {MAX_FILES:,} Caliper profiles: model a part of the set at a time",
                path=path,
            )
    return files


def _names(parameters: Sequence[str] | str | None) -> list[str]:
    if parameters is None:
        return []
    names = parameters.split(",") if isinstance(parameters, str) else list(parameters)
    names = [name.strip() for name in names]
    if any(not name for name in names) or len(set(names)) != len(names):
        raise InputError(f"--parameters {','.join(names)}: name each Adiak global once")
    return names


def _conditions(where: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    if where is None:
        return {}
    if isinstance(where, Mapping):
        return {str(k): str(v) for k, v in where.items()}
    conditions = {}
    for item in where:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise InputError(f"--where {item!r}: give a global and its value, KEY=VALUE")
        conditions[key.strip()] = value.strip()
    return conditions


def _read_run(path: Path) -> _Run:
    """One profile: its globals, the Adiak types of those, and its (call path, metric,
    value) rows. A file caliper-reader cannot parse, or one without globals (Caliper
    writes them last, so a truncated file has none), is an InputError naming it."""
    import caliperreader

    require_regular_file(path)
    if path.suffix.lower() != SUFFIX and _starts_with_brace(path):
        return _read_split_json(path)
    reader = caliperreader.CaliperReader()
    try:
        reader.read(str(path))
    except Exception as exc:  # a third-party parser: any failure means a damaged file
        raise InputError(
            f"not a readable Caliper profile, damaged or cut short ({type(exc).__name__}: "
            f"{str(exc)[:80]}); write it again with Caliper, or leave it out",
            path=path,
        ) from None
    if not reader.globals:
        raise InputError(
            "a Caliper profile without globals (Adiak metadata): the file is cut short "
            "(Caliper writes the globals last) or was not written by a run with Adiak",
            path=path,
        )
    run = _Run(
        path,
        RunSettings(
            str(path),
            {name: _text(value) for name, value in reader.globals.items()},
            {name: _adiak_type(reader, name) for name in reader.globals},
        ),
    )
    values = [a for a in reader.attributes() if _is_measurement(reader, a)]
    for attribute in values:
        unit = str(reader.attribute(attribute).get("attribute.unit") or "")
        run.units[TIME_NAMES.get(attribute, attribute)] = UNITS.get(unit, unit)
    for record in reader.records:
        callpath = _callpath(record.get("path"))
        if callpath is None:
            continue  # time outside every region: no call path to model
        for attribute in values:
            if attribute in record:
                value = _number(record[attribute], path, attribute)
                run.rows.append((callpath, TIME_NAMES.get(attribute, attribute), value))
    return _completed(run)


def _completed(run: _Run) -> _Run:
    """``run`` with the exclusive time derived where it has only inclusive time; a run
    without any measured region is an InputError."""
    inclusive = {c: v for c, metric, v in run.rows if metric == TIME_INCLUSIVE}
    if inclusive and not any(metric == TIME_METRIC for _, metric, _ in run.rows):
        run.rows.extend((c, TIME_METRIC, v) for c, v in _exclusive(inclusive).items())
        run.units[TIME_METRIC] = run.units.get(TIME_INCLUSIVE, "s")
    if not run.rows:
        raise InputError(
            "this Caliper profile has no region with a measured value; profile with a "
            "configuration that aggregates by region (CALI_CONFIG=spot or "
            "hatchet-region-profile)",
            path=run.path,
        )
    return run


def _read_split_json(path: Path) -> _Run:
    """One profile in Caliper's json-split form (``cali-query -q "... format json-split"``,
    what hatchet's ``from_caliper`` reads): ``columns`` and their ``column_metadata``,
    ``data`` rows, ``nodes`` (a region's label, its column and its parent's index; a row's
    ``path`` is the index of its innermost region), and every other top-level key a global.
    Rows per rank (an ``mpi.rank`` column) give each region's mean over ranks and, as
    ``NAME:max``, the slowest rank's value, as perfcast's own runtime reports them."""
    from perfcast.experiment.io.jsontext import decode
    from perfcast.experiment.io.registry import read_utf8

    document = decode(read_utf8(path), path=path, what="a Caliper json-split profile")
    sections = ("data", "columns", "column_metadata", "nodes")
    if not isinstance(document, dict) or any(
        not isinstance(document.get(k), list) for k in sections
    ):
        raise InputError(
            "not a Caliper profile: a JSON one is Caliper's json-split form, an object with "
            "the lists data, columns, column_metadata and nodes",
            path=path,
        )
    columns = [str(name) for name in document["columns"]]
    metadata = document["column_metadata"]
    if "path" not in columns or len(metadata) != len(columns):
        raise InputError(
            "json-split profile without a path column, or with column_metadata of another "
            "length than columns: query it again with cali-query ... format json-split",
            path=path,
        )
    at = columns.index("path")
    rank = columns.index(RANK_COLUMN) if RANK_COLUMN in columns else None
    values = [
        i
        for i, (name, entry) in enumerate(zip(columns, metadata, strict=True))
        if isinstance(entry, dict)
        and entry.get("is_value") is True
        and i != rank
        and name not in BOOKKEEPING_COLUMNS
        and not name.endswith(BOOKKEEPING_VALUES)
    ]
    regions = _split_regions(document["nodes"], path)
    globals_ = {k: _text(v) for k, v in document.items() if k not in sections}
    run = _Run(path, RunSettings(str(path), globals_, {}))
    for i in values:
        unit = str(metadata[i].get("attribute.unit") or "")
        run.units[_split_name(columns[i])] = UNITS.get(unit, unit)
    by_rank: dict[tuple[str, str], list[float]] = defaultdict(list)
    for number, row in enumerate(document["data"]):
        if not isinstance(row, list) or len(row) != len(columns):
            raise InputError(f"data row {number} does not have {len(columns)} values", path=path)
        node = row[at]
        if node is None:
            continue  # outside every region
        if not isinstance(node, int) or not 0 <= node < len(regions):
            raise InputError(f"data row {number}: path {node!r} is no node's index", path=path)
        for i in values:
            if row[i] is not None:
                value = _number(row[i], path, columns[i])
                by_rank[(regions[node], _split_name(columns[i]))].append(value)
    for (callpath, metric), measured in by_rank.items():
        run.rows.append((callpath, metric, sum(measured) / len(measured)))
        if rank is not None:
            run.rows.append((callpath, with_max(metric), max(measured)))
            run.units[with_max(metric)] = run.units.get(metric, "")
    return _completed(run)


def _split_name(column: str) -> str:
    """A json-split column's metric name: Caliper's time attributes and hatchet's
    spellings of them as perfcast names time (:data:`TIME_NAMES`), others as they are."""
    return TIME_NAMES.get(column) or SPLIT_TIME_NAMES.get(column, column)


def _split_regions(nodes: list[Any], path: Path) -> list[str]:
    """Each node's call path: its label after its ancestors' (a parent is listed before
    its children, as cali-query writes them; a reference forward or to itself is refused,
    so no cycle can be followed)."""
    callpaths: list[str] = []
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("label"), str | int | float):
            raise InputError(f"node {index} has no label", path=path)
        parent = node.get("parent")
        label = recorded_callpath([node["label"]])
        if parent is None:
            callpaths.append(label)
        elif isinstance(parent, int) and 0 <= parent < index:
            callpaths.append(callpaths[parent] + SEPARATOR + label)
        else:
            raise InputError(
                f"node {index}: parent {parent!r} is not an earlier node's index", path=path
            )
    return callpaths


def _starts_with_brace(path: Path) -> bool:
    with open(path, "rb") as file:
        return file.read(256).lstrip().startswith(b"{")


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _adiak_type(reader: Any, name: str) -> str:
    try:
        return str(reader.attribute(name).get("adiak.type") or "")
    except KeyError:
        return ""


def _is_measurement(reader: Any, attribute: str) -> bool:
    try:
        entry = reader.attribute(attribute)
    except KeyError:
        return False
    return bool(entry.is_value()) and not attribute.endswith(BOOKKEEPING_VALUES)


def _callpath(path: Any) -> str | None:
    """A record's region nesting as a call path (None outside every region)."""
    if path is None:
        return None
    regions = path if isinstance(path, list) else [path]
    return recorded_callpath(regions) if regions else None


def _number(text: Any, path: Path, attribute: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(
            f"attribute {attribute!r} holds {str(text)[:40]!r}, not a number", path=path
        ) from None
    if not math.isfinite(value):
        raise InputError(f"attribute {attribute!r} holds {text!r}, not a finite number", path=path)
    return value


def _exclusive(inclusive: Mapping[str, float]) -> dict[str, float]:
    """Each region's inclusive time less its direct children's; a child measured without
    its parent (never in Caliper's nesting) leaves the parent as it is. Timer rounding can
    make the difference a hair below zero: it is clipped to zero."""
    children: dict[str, float] = defaultdict(float)
    for callpath, value in inclusive.items():
        parent, separator, _ = callpath.rpartition(SEPARATOR)
        if separator and parent in inclusive:
            children[parent] += value
    return {c: max(0.0, v - children.get(c, 0.0)) for c, v in inclusive.items()}


def _coordinate(
    run: RunSettings, chosen: Sequence[str], runs: Sequence[RunSettings]
) -> tuple[float, ...]:
    values = []
    for name in chosen:
        if name not in run.globals:
            raise InputError(
                f"no Adiak global {name!r} in this profile; {_globals_listing(runs)}",
                path=run.label,
            )
        text = run.globals[name]
        try:
            value = float(text)
        except ValueError:
            raise InputError(
                f"global {name!r} is {text[:40]!r}, not a number: a parameter must be numeric; "
                f"to model one {name} only, keep it with --where {name}={text[:40]}",
                path=run.label,
            ) from None
        if not math.isfinite(value):
            raise InputError(f"global {name!r} is {text!r}, not a finite number", path=run.label)
        values.append(value)
    return tuple(values)


def _is_setting(name: str, runs: Sequence[RunSettings]) -> bool:
    """Whether a global configures the run (compared between runs) or records it: Caliper's
    own, who ran and when, and measured results (Adiak's dates and doubles; without
    Adiak types, as json-split writes globals, numbers with a fraction such as
    ``elapsed_time``)."""
    if name in RUN_RECORD_GLOBALS or name.startswith(CALIPER_PREFIXES):
        return False
    if any(run.types.get(name) in RECORD_ADIAK_TYPES for run in runs):
        return False
    typed = any(name in run.types for run in runs)
    values = [run.globals[name] for run in runs if name in run.globals]
    return typed or not _fractional(values)


def _fractional(values: Sequence[str]) -> bool:
    """All numbers, some with a fraction: measured, not chosen."""
    try:
        numbers = [float(value) for value in values]
    except ValueError:
        return False
    return any(math.isfinite(n) and not n.is_integer() for n in numbers)


def check_settings(
    runs: Sequence[RunSettings], coordinates: Sequence[tuple[float, ...]], chosen: Sequence[str]
) -> None:
    """Refuse runs at one point that differ in a setting; warn of a setting that changes
    only together with the parameters (module docstring). ``coordinates`` are the runs'
    values of the ``chosen`` parameters."""
    names = sorted({n for run in runs for n in run.globals if n not in chosen})
    by_point: dict[tuple[float, ...], list[RunSettings]] = defaultdict(list)
    for run, point in zip(runs, coordinates, strict=True):
        by_point[point].append(run)
    confounded = []
    for name in names:
        if not _is_setting(name, runs):
            continue
        values = {run.globals.get(name) for run in runs}
        if len(values) < 2:
            continue
        for point, group in by_point.items():
            inside = sorted({str(run.globals.get(name, "(absent)")) for run in group})
            if len(inside) > 1:
                label = format_point(zip(chosen, point, strict=True))
                raise InputError(
                    f"the runs at {label} differ in {name!r} ({', '.join(inside[:6])}), which "
                    f"is not a parameter: they would be averaged into noise. Keep one with "
                    f"--where {name}={inside[0]}, or add {name} to --parameters if it is a "
                    f"number the cost depends on ({len(group)} runs there, e.g. "
                    f"{Path(group[0].label).name})",
                    path=group[0].label,
                )
        if not _follows(name, by_point):
            continue
        if not _alias(name, runs, coordinates):
            confounded.append(f"{name} ({', '.join(sorted(map(str, values))[:6])})")
    if confounded:
        warnings.warn(
            f"the runs also differ in {'; '.join(confounded)}, which changes only together "
            f"with {', '.join(chosen)}: its effect cannot be told apart from theirs",
            stacklevel=4,
        )


def _follows(name: str, by_point: Mapping[tuple[float, ...], list[RunSettings]]) -> bool:
    """Whether ``name`` is the same for every run at each point (checked before)."""
    return all(len({run.globals.get(name) for run in group}) == 1 for group in by_point.values())


def _alias(
    name: str, runs: Sequence[RunSettings], coordinates: Sequence[tuple[float, ...]]
) -> bool:
    """Whether ``name`` equals one chosen parameter in every run (``mpi.world.size``
    beside ``jobsize``): another spelling of it, nothing to report."""
    for index in range(len(coordinates[0]) if coordinates else 0):
        try:
            if all(
                float(run.globals.get(name, "nan")) == point[index]
                for run, point in zip(runs, coordinates, strict=True)
            ):
                return True
        except ValueError:
            return False
    return False


def _globals_listing(runs: Sequence[RunSettings]) -> str:
    """The globals the runs have, those that vary first: what to choose parameters from."""
    names = sorted({n for run in runs for n in run.globals if not n.startswith(CALIPER_PREFIXES)})
    varying = [n for n in names if len({run.globals.get(n) for run in runs}) > 1]
    settings = [n for n in varying if _is_setting(n, runs)]
    constant = [n for n in names if n not in varying]
    shown = ", ".join(f"{n} ({_span(runs, n)})" for n in (settings or varying)[:12]) or "none"
    return (
        f"globals that vary across the {len(runs)} runs: {shown}; the same in all: "
        f"{', '.join(constant[:20]) or 'none'}"
    )


def _span(runs: Sequence[RunSettings], name: str) -> str:
    values = sorted({run.globals.get(name, "") for run in runs}, key=_numeric_first)
    return ", ".join(v[:20] for v in values[:5]) + (", ..." if len(values) > 5 else "")


def _numeric_first(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def _values_seen(runs: Sequence[RunSettings], wanted: Mapping[str, str]) -> str:
    parts = []
    for key in wanted:
        seen = sorted({run.globals[key] for run in runs if key in run.globals})
        parts.append(
            f"{key} is {', '.join(v[:30] for v in seen[:8])}" if seen else f"no run has {key!r}"
        )
    return "; ".join(parts)


def looks_like_caliper(head: str) -> bool:
    """Caliper's ``.cali`` format: records of ``__rec=`` key-value pairs."""
    return head.startswith("__rec=")


FORMAT = Format(
    name=CALIPER_PROFILES,
    summary="Caliper profiles (.cali) with Adiak metadata: files, or a directory of them",
    reader=read_caliper,
    suffixes=(SUFFIX,),
    sniff=looks_like_caliper,
    collection=True,
    claims_directory=lambda path: next(path.rglob("*" + SUFFIX), None) is not None,
)
