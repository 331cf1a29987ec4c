"""The app spec: ``perfcast.toml``, one file that says how to build, run and vary a program.

A user describes their program once; every campaign stage (design, measure, taint) reads
this object instead of its own command-line flags. The format::

    [app]
    name = "stencil"
    directory = "."                       # build and run here (relative to this file)
    store = "stencil.sqlite"              # the campaign store

    [build]                               # either sources ...
    sources = ["jacobi.c", "grid.c"]
    compiler = "mpicc"
    flags = ["-O2"]
    output = "jacobi"
    # command = "make CC='{perfcast_build} mpicc'"   # ... or a build command
    counters = false                      # perfcast build --counters
    counting_pass = true                  # counts once per point in a second build
    filter = "relevant.txt"               # perfcast build --filter
    keep_inlined = false                  # perfcast build --keep-inlined

    [run]
    command = "./jacobi {size} {iterations}"   # {name} placeholders; p is the rank count
    repetitions = 3
    timeout = 60                          # seconds per run
    retries = 1                           # extra attempts after a failed run

    [parameters]
    p = [1, 2, 4]                         # a list of values
    size = { start = 64, stop = 256, factor = 2 }   # geometric: 64 128 256
    n = { start = 10, stop = 50, step = 10 }        # arithmetic: 10 20 ... 50
    iterations = 20                       # a single value: fixed, not modeled

    [design]
    kind = "full"                         # full | lines | cross | sparse (see measure/design.py)

    [metrics]
    collect = ["time", "visits"]          # empty or absent: every metric

The run command is split into words as a shell would (quotes, backslashes) but never run by
one; its placeholders are plain ``{name}``, without format specs or conversions. Numbers are
finite and at most 2^53, and repetitions, retries and the size of the design are bounded
(``MAX_*`` here and in measure/design.py), so a typo is refused instead of planned.

tomllib reports syntax errors with a line but gives no line numbers for keys, so
:class:`KeyLines` finds them in the source text; every validation error names the file,
the line and the dotted key, and says what would be accepted.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
import string
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, SupportsFloat

from perfcast.errors import InputError
from perfcast.inputs import read_text

SPEC_NAME = "perfcast.toml"
"""The file name ``perfcast init`` writes and the commands look for by default."""

TAINT_PROFILE_SUFFIX = ".taint.json"
"""A campaign store ``app.sqlite``'s taint profile is ``app.taint.json`` beside it, where
``perfcast taint perfcast.toml`` writes it and design, measure and model find it."""

COUNTS_SUFFIX = ".counts.sqlite"
"""A campaign store ``app.sqlite``'s counting pass (:mod:`perfcast.measure.counting`) is
``app.counts.sqlite`` beside it, where ``perfcast model`` finds its exact counts."""


def beside(store: Path, suffix: str) -> Path:
    """The file of the campaign store ``app.sqlite`` named ``app`` + ``suffix``."""
    return store.with_name(store.stem + suffix)


RANKS = "p"
"""The parameter that is the number of MPI ranks (handed to the launcher, not the program)."""

DESIGN_KINDS = ("full", "lines", "cross", "sparse")

DEFAULT_REPETITIONS = 3
DEFAULT_TIMEOUT = 600.0
"""Seconds one run may take unless ``run.timeout`` says otherwise."""
DEFAULT_RETRIES = 1
"""Extra attempts for a failed run: one catches a transient failure (a busy node, a port
clash between two mpiruns) without hiding a program that fails every time."""
MAX_VALUES_PER_RANGE = 10_000
"""A range producing more values than this is almost certainly a typo in ``stop``."""
MAX_NUMBER = 2**53
"""The largest magnitude a number in the spec may have. Parameter values become floats (the
modeler fits in double precision), and beyond 2^53 whole numbers stop being exact: two
values of the spec could run as the same point. No rank count, size or timeout comes near."""
MAX_REPETITIONS = 1_000
"""Repetitions per point. Medians settle within a few dozen repetitions; a thousand is
beyond any campaign and keeps a typo (``1000000000``) from planning a billion runs."""
MAX_RETRIES = 100
"""Extra attempts for a failed run: a run failing a hundred times is not transient."""

PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A C-like identifier; matched with ``fullmatch`` (``$`` would let a trailing newline in)."""
CALLPATH, METRIC, REPETITION, VALUE = "callpath", "metric", "repetition", "value"
"""The measurement table's own columns (:class:`perfcast.experiment.Experiment`), named here,
below both the spec and the table, so that both refuse them as parameter names."""
RESERVED_NAMES = (CALLPATH, METRIC, REPETITION, VALUE)
"""Column names of the measurement table, so no parameter may take them."""
BUILD_PLACEHOLDER = "perfcast_build"
"""``{perfcast_build}`` in a build command expands to the ``perfcast build [options] --``
prefix, so ``make CC='{perfcast_build} mpicc'`` gets the spec's counters and filter (with
``--backend smpi`` also ``--smpi``, and the MPI wrapper after it becomes SimGrid's)."""


@dataclass(frozen=True)
class Parameter:
    """An input parameter and the values a campaign may give it, in ascending order."""

    name: str
    values: tuple[float, ...]

    @property
    def fixed(self) -> bool:
        """A single value: substituted into the command but not a model parameter."""
        return len(self.values) == 1


@dataclass(frozen=True)
class BuildSpec:
    """How to build the program through ``perfcast build``: sources or a command."""

    sources: tuple[str, ...] = ()
    compiler: str = "mpicc"
    flags: tuple[str, ...] = ()
    output: str | None = None
    command: str | None = None
    counters: bool = False
    filter: Path | None = None
    keep_inlined: bool = False
    """``perfcast build --keep-inlined``: the filter's functions that -O2 would inline stay
    out of line, so they are measured (costs nothing measurable on LULESH)."""
    counting_pass: bool = True
    """After the timing runs, the same build with counters, run once per point into
    ``app.counts.sqlite`` (:mod:`perfcast.measure.counting`): the exact counts the effort
    priors are made of, without a second campaign (no effect where ``counters`` is true)."""


@dataclass(frozen=True)
class RunSpec:
    """How to run one measurement; ``command`` has ``{parameter}`` placeholders."""

    command: str
    repetitions: int = DEFAULT_REPETITIONS
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    mpirun_args: tuple[str, ...] = ()
    expected_seconds: float | None = None
    """The user's estimate of one run's duration, for the plan's cost."""


@dataclass(frozen=True)
class DesignSpec:
    kind: str = "full"
    base: Mapping[str, float] = field(default_factory=dict)
    """For ``lines``: the point the one-parameter lines go through (default: smallest)."""
    extra_points: int = 1
    """For ``sparse``: points off the cross, cheapest first."""


@dataclass(frozen=True)
class SlurmSpec:
    """Cluster settings for ``--backend slurm``; all optional."""

    mode: str = "array"
    partition: str | None = None
    account: str | None = None
    max_parallel: int | None = None
    """At most this many array tasks at once (``--array=...%N``)."""
    sbatch_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class AppSpec:
    """A validated ``perfcast.toml``."""

    path: Path
    name: str
    directory: Path
    store: Path
    build: BuildSpec | None
    run: RunSpec
    parameters: tuple[Parameter, ...]
    design: DesignSpec = field(default_factory=DesignSpec)
    metrics: tuple[str, ...] = ()
    slurm: SlurmSpec = field(default_factory=SlurmSpec)
    key_lines: KeyLines | None = field(default=None, compare=False, repr=False)
    """Where each key is in the file, so later stages can point at it (:meth:`error`)."""

    def error(self, key_path: Sequence[str], message: str) -> InputError:
        """An InputError naming this spec's file, the line of ``key_path`` and the key: for
        stages after loading (the design) that refuse what a key asks for."""
        line = self.key_lines.line(key_path) if self.key_lines is not None else None
        prefix = f"{_dotted(key_path)}: " if key_path else ""
        return InputError(prefix + message, path=self.path, line=line)

    @property
    def varied(self) -> list[str]:
        """Names of the parameters with more than one value: the model's parameters."""
        return [p.name for p in self.parameters if not p.fixed]

    @property
    def fixed(self) -> dict[str, float]:
        return {p.name: p.values[0] for p in self.parameters if p.fixed}

    def parameter(self, name: str) -> Parameter:
        return next(p for p in self.parameters if p.name == name)


# -- locating keys in the source ------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_BARE_OR_QUOTED = r"(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')"
_KEY = re.compile(rf"^\s*({_BARE_OR_QUOTED}(?:\s*\.\s*{_BARE_OR_QUOTED})*)\s*=")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_BARE_OR_QUOTED})\s*=")


def _split_key(text: str) -> tuple[str, ...]:
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+", text)
    return tuple(p[1:-1] if p[0] in "\"'" else p for p in parts)


class KeyLines:
    """The line of every key in a TOML text, found by a light scan of the source.

    Handles tables, dotted keys and one-line inline tables; lines inside multi-line
    strings and arrays are skipped. ``line(path)`` falls back to the nearest enclosing
    key or table that was found, so an error always has a useful line.
    """

    def __init__(self, text: str):
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        depth = 0  # open brackets of a multi-line value
        in_string: str | None = None
        for number, raw in enumerate(text.splitlines(), start=1):
            if in_string:
                if in_string in raw:
                    in_string = None
                continue
            if depth:
                depth = max(0, depth + _bracket_balance(raw))
                continue
            header = _HEADER.match(raw)
            if header:
                table = _split_key(header.group(1))
                self.lines.setdefault(table, number)
                continue
            key = _KEY.match(raw)
            if not key:
                continue
            path = (*table, *_split_key(key.group(1)))
            self.lines.setdefault(path, number)
            value = raw[key.end() :]
            for inner in _INLINE_KEY.finditer(value):
                self.lines.setdefault((*path, *_split_key(inner.group(1))), number)
            for quote in ('"""', "'''"):
                if value.count(quote) % 2 == 1:
                    in_string = quote
            if not in_string:
                depth = max(0, _bracket_balance(value))

    def line(self, path: Sequence[str]) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _bracket_balance(text: str) -> int:
    text = re.sub(r"\"[^\"]*\"|'[^']*'|#.*$", "", text)
    return text.count("[") + text.count("{") - text.count("]") - text.count("}")


# -- validation helpers ------------------------------------------------------------------------


class _Checker:
    """Reads one table of the parsed TOML, remembering which keys were used.

    Hand-written rather than a pydantic model: an error names the file, line and key in
    the spec's own words (``perfcast.toml:6: run.timeout: must be a number, not a
    string 'x'``) and most checks relate keys to each other (the command's placeholders
    name parameters, ranges bound the design); pydantic would take over only the type
    checks, and each of its errors would be translated back to a key and line here.
    """

    def __init__(self, source: _Source, data: Any, path: tuple[str, ...]):
        self.source = source
        self.path = path
        if not isinstance(data, dict):
            raise source.error(path, f"must be a table ({_table_name(path)}), not {_kind(data)}")
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def error(self, key: str | None, message: str) -> InputError:
        path = self.path if key is None else (*self.path, key)
        return self.source.error(path, message)

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(value, kinds) or (float in kinds and isinstance(value, int))
        if not ok:
            names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise self.error(key, f"must be {names}, not {_kind(value)} {value!r}")
        if isinstance(value, str):
            self.text(key, value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.number(key, value)
        return value

    def number(self, key: str, value: float) -> float:
        """``value`` if it is finite and within :data:`MAX_NUMBER`: ``nan`` compares false
        with everything, so it would slip through every bound checked after it."""
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(key, f"must be a finite number, not {value}")
        if abs(value) > MAX_NUMBER:
            digits = f"a {len(str(value))}-digit number"
            shown = f"{value:.6g}" if isinstance(value, float) else digits
            raise self.error(
                key, f"{shown} is too large: numbers in the spec are at most 2^53 = {MAX_NUMBER}"
            )
        return value

    def text(self, key: str, value: str) -> str:
        """``value`` unless it holds a NUL character, which no path or command can carry."""
        if "\x00" in value:
            raise self.error(key, f"contains a NUL character: {value!r}")
        return value

    def require(self, key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in self.data:
            raise self.error(None, f"the key {_dotted((*self.path, key))!r} is required")
        return self.get(key, kind)

    def positive(
        self,
        key: str,
        default: float,
        *,
        integer: bool = False,
        zero: bool = False,
        limit: float | None = None,
    ):
        value = self.get(key, int if integer else float, default)
        if value < 0 or (value == 0 and not zero):
            bound = ">= 0" if zero else "> 0"
            raise self.error(key, f"must be {bound}, not {value!r}")
        if limit is not None and value > limit:
            raise self.error(key, f"{value} is more than the limit of {limit}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key, list, [])
        for item in value:
            if not isinstance(item, str):
                raise self.error(key, f"must be a list of strings; {item!r} is {_kind(item)}")
            self.text(key, item)
        return tuple(value)

    def table(self, key: str) -> _Checker | None:
        self.used.add(key)
        if key not in self.data:
            return None
        return _Checker(self.source, self.data[key], (*self.path, key))

    def finish(self, allowed: Sequence[str] | None = None) -> None:
        """Reject keys nobody asked for: most are typos of a real key."""
        allowed = sorted(self.used if allowed is None else allowed)
        for key in self.data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                where = f"in [{_dotted(self.path)}]" if self.path else "at the top level"
                raise self.error(
                    key, f"unknown key {key!r} {where}{hint} (known: {', '.join(allowed)})"
                )


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a table",
}


def _kind(value: Any) -> str:
    for kind in (bool, int, float, str, list, dict):
        if isinstance(value, kind):
            return _TYPE_NAMES[kind]
    return type(value).__name__


def _dotted(path: Sequence[str]) -> str:
    """``run.command``; a key that is not bare is quoted (``parameters."size\\n"``), so
    an error naming it stays on one line."""
    return ".".join(k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in path)


def _table_name(path: Sequence[str]) -> str:
    return f"[{_dotted(path)}]" if path else "the document"


@dataclass
class _Source:
    path: Path
    lines: KeyLines

    def error(self, key_path: Sequence[str], message: str) -> InputError:
        prefix = f"{_dotted(key_path)}: " if key_path else ""
        return InputError(prefix + message, path=self.path, line=self.lines.line(key_path))


# -- the reader ------------------------------------------------------------------------------


def load_spec(path: str | Path) -> AppSpec:
    """Read and validate a ``perfcast.toml``; errors name the file, line and key."""
    path = Path(path)
    text = read_text(path, "app spec", f"write a starter one with `perfcast init {path}`")
    return parse_spec(text, path)


def parse_spec(text: str, path: str | Path = SPEC_NAME) -> AppSpec:
    """Validate the text of a ``perfcast.toml``; relative paths resolve against ``path``."""
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line = int(found.group(1)) if found else None
        if line is None and "end of document" in str(exc):
            line = max(1, len(text.splitlines()))
        message = message.replace(" (at end of document)", " at the end of the file")
        raise InputError(f"not valid TOML: {message}", path=path, line=line) from None
    except ValueError as exc:  # Python refuses to read integers of more than 4300 digits
        long_number = re.search(r"\d{1000,}", text)
        line = text.count("\n", 0, long_number.start()) + 1 if long_number else None
        reason = str(exc).split(";")[0]  # not Python's advice on raising the limit
        raise InputError(f"not a usable number: {reason}", path=path, line=line) from None
    source = _Source(path, KeyLines(text))
    top = _Checker(source, data, ())
    base_dir = path.resolve().parent

    app = top.table("app") or _Checker(source, {}, ("app",))
    name = app.get("name", str, base_dir.name) or base_dir.name
    directory = (base_dir / app.get("directory", str, ".")).resolve()
    store = base_dir / app.get("store", str, f"{_safe_name(name)}.sqlite")
    app.finish(["directory", "name", "store"])

    parameters = _parameters(top.table("parameters"), source)
    names = [p.name for p in parameters]
    build = _build(top.table("build"))
    run = _run(top.table("run"), top, names, parameters)
    design = _design(top.table("design"), parameters)
    metrics_table = top.table("metrics")
    metrics: tuple[str, ...] = ()
    if metrics_table is not None:
        metrics = metrics_table.strings("collect")
        metrics_table.finish(["collect"])
    slurm = _slurm(top.table("slurm"))
    top.finish(["app", "build", "design", "metrics", "parameters", "run", "slurm"])
    return AppSpec(
        path=path,
        name=name,
        directory=directory,
        store=store,
        build=build,
        run=run,
        parameters=tuple(parameters),
        design=design,
        metrics=metrics,
        slurm=slurm,
        key_lines=source.lines,
    )


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "campaign"


def _parameters(table: _Checker | None, source: _Source) -> list[Parameter]:
    if table is None or not table.data:
        raise source.error(
            ("parameters",),
            "the app spec needs a [parameters] table with at least one parameter, "
            "e.g. `p = [1, 2, 4]`",
        )
    parameters = []
    for name, raw in table.data.items():
        table.used.add(name)
        if not PARAMETER_NAME.fullmatch(name) or name in RESERVED_NAMES:
            raise table.error(
                name,
                f"{name!r} is not a usable parameter name: use a C-like identifier "
                f"other than {', '.join(RESERVED_NAMES)}",
            )
        values = _values(table, name, raw)
        if name == RANKS and any(v != int(v) for v in values):
            raise table.error(name, "the rank count p must be a whole number")
        parameters.append(Parameter(name, values))
    if not any(not p.fixed for p in parameters):
        raise source.error(
            ("parameters",),
            "no parameter varies, so there is nothing to model; give at least one parameter "
            "a list or range of values",
        )
    return parameters


def _values(table: _Checker, name: str, raw: Any) -> tuple[float, ...]:
    if isinstance(raw, bool) or not isinstance(raw, int | float | list | dict):
        raise table.error(
            name,
            f"must be a number, a list of numbers or a range table "
            f"{{ start, stop, step|factor }}, not {_kind(raw)}",
        )
    if isinstance(raw, int | float):
        values = [raw]
    elif isinstance(raw, list):
        values = raw
        if not values:
            raise table.error(name, "the list of values is empty")
    else:
        values = _range(_Checker(table.source, raw, (*table.path, name)))
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise table.error(name, f"values must be numbers; {value!r} is {_kind(value)}")
        table.number(name, value)
        if value <= 0:
            raise table.error(
                name, f"values must be positive (PMNF takes powers and logarithms), not {value}"
            )
    if len(set(values)) != len(values):
        duplicate = next(v for v in values if values.count(v) > 1)
        raise table.error(name, f"the value {duplicate} is listed twice")
    return tuple(sorted(_tidy(v) for v in values))


def _range(table: _Checker) -> list[float]:
    start = table.require("start", float)
    stop = table.require("stop", float)
    if table.has("step") == table.has("factor"):
        raise table.error(
            None, "a range needs exactly one of step (arithmetic) or factor (geometric)"
        )
    if stop < start:
        raise table.error("stop", f"stop ({stop}) is smaller than start ({start})")
    values: list[float] = []
    if table.has("step"):
        step = table.positive("step", 1.0)
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > MAX_VALUES_PER_RANGE:
            raise table.error("step", f"the range has {count} values; check start/stop/step")
        values = [start + i * step for i in range(count)]
    else:
        factor = table.get("factor", float)
        if factor <= 1:
            raise table.error("factor", f"a geometric factor must be > 1, not {factor}")
        value = start
        while value <= stop * (1 + 1e-12):
            values.append(value)
            value *= factor
            if len(values) > MAX_VALUES_PER_RANGE:
                raise table.error("factor", "the range has too many values; check start/stop")
    table.finish(["factor", "start", "step", "stop"])
    return values


def _tidy(value: float) -> float:
    """Whole numbers as ints, so commands read ``-np 4`` and not ``-np 4.0``."""
    rounded = round(value, 12)
    return int(rounded) if float(rounded).is_integer() else rounded


def _build(table: _Checker | None) -> BuildSpec | None:
    if table is None:
        return None
    command = table.get("command", str)
    sources = table.strings("sources")
    if command and sources:
        raise table.error("command", "give either build.command or build.sources, not both")
    if not command and not sources:
        raise table.error(None, '[build] needs sources = [...] or a command = "..."')
    output = table.get("output", str)
    if sources and not output:
        raise table.error(
            "output", "build.output (the executable to write) is required with build.sources"
        )
    if command:
        _check_placeholders(table, "command", command, {BUILD_PLACEHOLDER})
    filter_name = table.get("filter", str)
    keep_inlined = table.get("keep_inlined", bool, False)
    if keep_inlined and not filter_name:
        raise table.error(
            "keep_inlined", "keeps the filter's functions out of line: it needs build.filter"
        )
    spec = BuildSpec(
        sources=sources,
        compiler=table.get("compiler", str, "mpicc"),
        flags=table.strings("flags"),
        output=output,
        command=command,
        counters=table.get("counters", bool, False),
        counting_pass=table.get("counting_pass", bool, True),
        filter=(table.source.path.resolve().parent / filter_name) if filter_name else None,
        keep_inlined=keep_inlined,
    )
    table.finish()
    return spec


def _run(
    table: _Checker | None, top: _Checker, names: list[str], parameters: list[Parameter]
) -> RunSpec:
    if table is None:
        raise top.error("run", 'the app spec needs a [run] table with command = "..."')
    command = table.require("command", str)
    used = _check_placeholders(table, "command", command, set(names))
    _check_words(table, "command", command, parameters)
    for parameter in parameters:
        if parameter.fixed or parameter.name == RANKS or parameter.name in used:
            continue
        raise table.error(
            "command",
            f"the parameter {parameter.name!r} varies but the run command never uses it; "
            f"add {{{parameter.name}}} to the command or give it a single value",
        )
    expected = table.get("expected_seconds", float)
    if expected is not None and not expected > 0:
        raise table.error("expected_seconds", f"must be > 0, not {expected}")
    spec = RunSpec(
        command=command,
        repetitions=table.positive(
            "repetitions", DEFAULT_REPETITIONS, integer=True, limit=MAX_REPETITIONS
        ),
        timeout=float(table.positive("timeout", DEFAULT_TIMEOUT)),
        retries=table.positive(
            "retries", DEFAULT_RETRIES, integer=True, zero=True, limit=MAX_RETRIES
        ),
        mpirun_args=table.strings("mpirun_args"),
        expected_seconds=expected,
    )
    table.finish()
    return spec


def _check_placeholders(table: _Checker, key: str, command: str, known: set[str]) -> set[str]:
    """The ``{name}`` fields of a command, checked as fully as :func:`expand` will use them.

    Unknown names and bad braces are errors, and so are format specs and conversions
    (``{size:d}``, ``{size!r}``): perfcast writes each value itself (``4``, not ``4.0``),
    so they could only fail or pad (``{size:>1000000000}``) when ``measure`` runs, long
    after ``design`` accepted the spec.
    """
    try:
        parsed = list(string.Formatter().parse(command))
    except ValueError as exc:
        raise table.error(
            key, f"bad placeholder in {command!r}: {exc}; write literal braces as {{{{ and }}}}"
        ) from None
    fields = set()
    for _, name, format_spec, conversion in parsed:
        if name is None:
            continue
        if name not in known:
            choices = ", ".join(f"{{{k}}}" for k in sorted(known)) or "none"
            shown = _printable("{" + name + "}")
            raise table.error(key, f"unknown placeholder {shown} (known: {choices})")
        if format_spec or conversion is not None:
            written = "{" + name + (f"!{conversion}" if conversion else "")
            written += (f":{format_spec}" if format_spec else "") + "}"
            raise table.error(
                key,
                f"{_printable(written)}: write {{{name}}} without a format or conversion; "
                "perfcast writes the value itself (4, not 4.0)",
            )
        fields.add(name)
    return fields


def _printable(text: str) -> str:
    """``text``, or its repr if it holds a newline or another control character: an error
    message stays one line."""
    return text if text.isprintable() else repr(text)


def _check_words(table: _Checker, key: str, command: str, parameters: list[Parameter]) -> None:
    """The run command splits into words the way ``measure`` splits it (shell quoting, no
    shell): an unbalanced quote or an empty command is refused now, not at the first run."""
    example = expand(command, {p.name: p.values[0] for p in parameters})
    try:
        words = shlex.split(example)
    except ValueError as exc:
        raise table.error(
            key,
            f"cannot split {command!r} into words ({exc}); quote as a shell does: "
            "close every ' and \", or escape it with \\",
        ) from None
    if not words:
        raise table.error(key, "the run command is empty; give the program to run")


def _design(table: _Checker | None, parameters: list[Parameter]) -> DesignSpec:
    if table is None:
        return DesignSpec()
    kind = table.get("kind", str, "full")
    if kind not in DESIGN_KINDS:
        raise table.error("kind", f"unknown design {kind!r}; choose one of {DESIGN_KINDS}")
    base: dict[str, float] = {}
    base_table = table.table("base")
    if base_table is not None:
        by_name = {p.name: p for p in parameters}
        for name, value in base_table.data.items():
            base_table.used.add(name)
            if name not in by_name:
                raise base_table.error(name, f"{name!r} is not a parameter ({', '.join(by_name)})")
            if value not in by_name[name].values:
                raise base_table.error(
                    name,
                    f"{value!r} is not one of the values of {name}: {list(by_name[name].values)}",
                )
            base[name] = value
    spec = DesignSpec(
        kind=kind,
        base=base,
        extra_points=table.positive("extra_points", 1, integer=True, zero=True),
    )
    table.finish()
    return spec


def _slurm(table: _Checker | None) -> SlurmSpec:
    if table is None:
        return SlurmSpec()
    mode = table.get("mode", str, "array")
    if mode not in ("array", "allocation"):
        raise table.error("mode", f"must be 'array' or 'allocation', not {mode!r}")
    max_parallel = table.get("max_parallel", int)
    if max_parallel is not None and max_parallel < 1:
        raise table.error("max_parallel", f"must be >= 1, not {max_parallel}")
    spec = SlurmSpec(
        mode=mode,
        partition=table.get("partition", str),
        account=table.get("account", str),
        max_parallel=max_parallel,
        sbatch_args=table.strings("sbatch_args"),
    )
    table.finish()
    return spec


def expand(template: str, values: Mapping[str, float]) -> str:
    """Fill ``{name}`` placeholders with parameter values (``4``, not ``4.0``)."""
    return template.format_map({k: format_value(v) for k, v in values.items()})


EXACT = 2**53
"""The largest whole number a float holds exactly."""


def format_value(value: SupportsFloat) -> str:
    """How a parameter value is written, into a command, a label or a message: the one spelling.

    Whole numbers up to 2^53 as integers (``1000000``, never ``1e+06`` nor ``4.0``), so a
    command reads ``-np 4`` and a message names the value the user typed; anything else to
    12 significant digits, enough for any value a user gives and short of the float noise
    of a computed one (``0.3``, not ``0.30000000000000004``). :mod:`perfcast.experiment.points`
    spells whole points with it.
    """
    number = float(value)
    if number.is_integer() and abs(number) <= EXACT:
        return str(int(number))
    return f"{number:.12g}"
