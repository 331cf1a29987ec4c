"""The taint profile as a typed contract: what ``perfcast taint`` writes and every later
stage (design, build, model) reads.

The profile is a file handed from one stage to the next, often days apart and sometimes
edited by hand, so it is validated once, on read (:func:`read_profile`), into frozen
dataclasses; a damaged profile is refused with the file and the key at fault
(``functions["main"].callpaths["main->kernel"].terms``) instead of failing deep inside a
consumer. Consumers read attributes, never string keys, and the writer goes through
:meth:`TaintProfile.to_json` / :meth:`TaintProfile.save`, so the format is defined here
once (its documentation: README.md in this package).

Dependencies are sums of *products of parameter sets* (``size*p + iters``), held as
:data:`Dependency`: a frozen set of terms, none contained in another, the constant being the
one empty term. In the file a dependency is a list of sorted name lists without the empty
term (``[]`` is the constant).

**Versions.** The ``format`` key names the format and its version
(``perfcast-taint-profile/1``). A reader refuses a version it does not know, with the
version it found; a change that old readers would misread bumps the version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.inputs import JsonChecker, read_json
from perfcast.outputs import OutputKind, PathLike, json_with, write_output

FORMAT_NAME = "perfcast-taint-profile"
VERSION = 1
FORMAT = f"{FORMAT_NAME}/{VERSION}"
PROFILE_FILE = OutputKind("a perfcast taint profile", json_with(FORMAT_NAME))
"""A profile replaces only an earlier profile (of any version)."""

Term = frozenset[str]
Dependency = frozenset[Term]
CONSTANT: Dependency = frozenset({frozenset()})


MAX_TERMS = 64
"""Most products a dependency keeps. A call path ten calls deep below sixteen loops, each
bounded by another of sixteen parameters, runs a sum of C(16, 10) = 8,008 products, and
composing such sums made ``taint import`` of a 17 KB perf-taint file run for minutes. Past
this many, the dependency is the one product of all its parameters: a bound every term
divides, so a prior built from it still names every parameter that matters (it only loses
which of them never meet in one term)."""


def absorb(terms: Iterable[Term]) -> Dependency:
    """``terms`` as a dependency: terms contained in a larger one dropped (``n*m + n`` is
    ``n*m``: every model the first allows, the second allows too); more than
    :data:`MAX_TERMS` left become their one product.

    Largest terms first: a term is dropped when a kept one contains it (a larger term
    that contains it was seen before it, and was kept or is inside a kept one), so each
    term is compared with the kept ones only."""
    unique = set(terms)
    if len(unique) < 2:  # most dependencies: nothing to absorb
        return frozenset(unique) if unique else CONSTANT
    kept: list[Term] = []
    for term in sorted(unique, key=len, reverse=True):
        if not any(term <= other for other in kept):
            kept.append(term)
            if len(kept) > MAX_TERMS:
                return frozenset({frozenset().union(*unique)})
    return frozenset(kept)


def add(*parts: Dependency) -> Dependency:
    return absorb(t for part in parts for t in part)


def multiply(labels: Term, inner: Dependency) -> Dependency:
    return absorb(labels | t for t in inner)


def product(first: Dependency, second: Dependency) -> Dependency:
    """Every term of ``first`` times every term of ``second``."""
    return absorb(a | b for a in first for b in second)


def render(dependency: Dependency) -> str:
    """``size*p + iters``; ``1`` for a constant."""
    return " + ".join("*".join(t) for t in terms_json(dependency)) or "1"


def terms_json(dependency: Dependency) -> list[list[str]]:
    """The file's form of a dependency: larger products first, the constant term left out."""
    return sorted((sorted(t) for t in dependency if t), key=lambda t: (-len(t), t))


_DEFINITION_SUFFIX = re.compile(r" \[[^\[\]]+\]$")


def symbol_name(key: str) -> str:
    """The name measurements print for a profile key: ``helper [a.c]`` -> ``helper``.

    Two definitions that print alike (``static`` functions of two files) are kept apart in a
    profile as ``NAME [FILE]``; XRay, the perfcast runtime, Score-P and the linker know both
    as ``NAME``. Any other key is returned unchanged."""
    return _DEFINITION_SUFFIX.sub("", key)


def measured_callpath(callpath: str) -> str:
    """A profile call path as measurements spell it (every frame through
    :func:`symbol_name`): ``main->helper [a.c]`` -> ``main->helper``."""
    return join_callpath(symbol_name(frame) for frame in split_callpath(callpath))


def parameters_of(dependency: Dependency) -> tuple[str, ...]:
    """Every parameter the dependency names, sorted."""
    return tuple(sorted(frozenset().union(*dependency)))


@dataclass(frozen=True)
class ParameterCoverage:
    """Where a parameter came from and how much of the code it reaches."""

    source: str | None = None
    """``argv:N``, ``flag:-x`` (several, comma-separated, where one parameter is passed in
    several places), ``perfcast_register``, ``MPI_Comm_size``, or the library database
    (``p`` of the collectives only); None in a profile written by hand."""
    loops: int = 0
    """Loops whose trip count it bounds."""
    functions: int = 0
    """Functions with such a loop of their own."""
    branches: int = 0
    """Tainted branches it decides."""
    mpi: tuple[str, ...] = ()
    """Library routines whose cost it enters."""
    switches: int = 0
    """Branches it decides that select work (:attr:`Branch.switches_work`): algorithm
    switches, through which a function's cost depends on it without bounding a loop."""

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "loops": self.loops,
            "functions": self.functions,
            "branches": self.branches,
            "mpi": list(self.mpi),
            **({"switches": self.switches} if self.switches else {}),
        }


@dataclass(frozen=True)
class Loop:
    """One loop of a function's loop-nest tree, labels merged over call paths."""

    line: int
    kind: str
    """``for``, ``while``, ``do`` or ``range-for``."""
    params: tuple[str, ...]
    executed: bool | None = None
    """None: the loop has no condition the analysis observes."""
    constant_bounds: bool = False
    """The static pre-pass's verdict."""
    loops: tuple[Loop, ...] = ()

    def walk(self) -> Iterator[Loop]:
        """This loop and every loop nested in it."""
        yield self
        for inner in self.loops:
            yield from inner.walk()

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "kind": self.kind,
            "params": list(self.params),
            "executed": self.executed,
            "constant_bounds": self.constant_bounds,
            "loops": [loop.to_json() for loop in self.loops],
        }


@dataclass(frozen=True)
class Branch:
    """A branch (``if``/``switch`` condition) decided by parameters in the taint run."""

    line: int
    params: tuple[str, ...]
    in_loop: bool = False
    exits_loops_at: tuple[int, ...] = ()
    """Lines of the loops it guards a ``break``/``return`` of: it bounds their trip count."""
    evaluated: int = 0
    taken: int = 0
    calls: tuple[str, ...] = ()
    """Functions called in its arms (statically)."""
    position: bool = False
    """Also decided by the process's position (``rank``): it tells ranks of one run apart
    (boundary from interior), so it is no algorithm switch between runs."""
    selects_work: bool = False
    """A loop, or a call of a function that may depend on a parameter, lies in its arms
    (statically): it decides how much work runs, not only a value (``if (seed == 0) seed =
    1;`` selects no work)."""

    @property
    def switches_work(self) -> bool:
        """Its parameters switch algorithms: it selects work, took one side in the taint
        run (mixed outcomes split work by progress or data, as C2 reads them) and is not
        decided by the rank's position (that differs between ranks, not runs)."""
        return self.selects_work and self.uniform and not self.position

    @property
    def uniform(self) -> bool:
        """Always or never taken in the taint run (or never counted): the parameter's
        value, not the data a loop visits, chose the path."""
        return not (self.evaluated and 0 < self.taken < self.evaluated)

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "params": list(self.params),
            "in_loop": self.in_loop,
            "exits_loops_at": list(self.exits_loops_at),
            "evaluated": self.evaluated,
            "taken": self.taken,
            "calls": list(self.calls),
            **({"position": True} if self.position else {}),
            **({"selects_work": True} if self.selects_work else {}),
        }


@dataclass(frozen=True)
class LibraryUse:
    """The calls to one library routine: the parameters their cost depends on, how many."""

    params: tuple[str, ...]
    calls: int

    def to_json(self) -> dict[str, Any]:
        return {"params": list(self.params), "calls": self.calls}


@dataclass(frozen=True)
class CallpathProfile:
    """A function's dependency on one call path (``main->solve(int, int)``).

    ``terms`` is the cost of *one call*, callees composed at their call sites;
    ``exclusive_terms`` counts the function's own loops only; ``visits`` is how often the
    path runs (the loops around its call sites up the path).
    """

    terms: Dependency
    exclusive_terms: Dependency
    visits: Dependency = CONSTANT
    loops: tuple[Loop, ...] = ()
    mpi: Mapping[str, LibraryUse] = field(default_factory=dict)

    def total(self, *, inclusive: bool = True) -> Dependency:
        """The dependency of the call path's measured *total*: per-call cost times visits.

        Profilers sum a call path's time, counters and bytes over all its visits, so a
        constant-cost function called ``n`` times measures ``n``.
        """
        return product(self.visits, self.terms if inclusive else self.exclusive_terms)

    def to_json(self, *, routine: bool = False) -> dict[str, Any]:
        """The file's form; a library ``routine``'s call path has no loops of its own, so
        it is written without its (equal) exclusive dependency, loops and calls."""
        data: dict[str, Any] = {
            "params": list(parameters_of(self.terms)),
            "dependency": render(self.terms),
            "terms": terms_json(self.terms),
        }
        if not routine:
            data["exclusive_dependency"] = render(self.exclusive_terms)
            data["exclusive_terms"] = terms_json(self.exclusive_terms)
            data["loops"] = [loop.to_json() for loop in self.loops]
            data["mpi"] = {name: use.to_json() for name, use in self.mpi.items()}
        return {**data, "visits": render(self.visits), "visits_terms": terms_json(self.visits)}


@dataclass(frozen=True)
class FunctionProfile:
    """A function of the program (``file`` set) or a library routine (``file`` None)."""

    file: str | None
    line: int | None
    terms: Dependency
    """Inclusive dependency of one call, merged over call paths."""
    exclusive_terms: Dependency
    callpaths: Mapping[str, CallpathProfile]
    library: str | None = None
    """The library of a library routine (``MPI``)."""
    loops: tuple[Loop, ...] = ()
    branches: tuple[Branch, ...] = ()
    mpi: Mapping[str, LibraryUse] = field(default_factory=dict)
    recursive: bool = False

    @property
    def is_library(self) -> bool:
        """A library routine: measured by its wrapper, never inside its caller."""
        return self.file is None

    @property
    def dependency(self) -> str:
        return render(self.terms)

    def total(self, *, inclusive: bool = True) -> Dependency:
        """The loosest total dependency any of its call paths has (for a call path the
        profile never saw); the per-call dependency where it lists no call path."""
        if not self.callpaths:
            return self.terms if inclusive else self.exclusive_terms
        return add(*(entry.total(inclusive=inclusive) for entry in self.callpaths.values()))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "line": self.line}
        if self.library is not None:
            data["library"] = self.library
        return {
            **data,
            "params": list(parameters_of(self.terms)),
            "dependency": render(self.terms),
            "terms": terms_json(self.terms),
            "exclusive_dependency": render(self.exclusive_terms),
            "exclusive_terms": terms_json(self.exclusive_terms),
            "loops": [loop.to_json() for loop in self.loops],
            "branches": [branch.to_json() for branch in self.branches],
            "mpi": {name: use.to_json() for name, use in self.mpi.items()},
            "recursive": self.recursive,
            "callpaths": {
                path: entry.to_json(routine=self.is_library)
                for path, entry in self.callpaths.items()
            },
        }


@dataclass(frozen=True)
class TaintRun:
    """What ran: the command, and in the campaign form the spec and the design point."""

    command: str
    spec: str | None = None
    point: Mapping[str, float] | None = None
    control_flow: bool = True
    """False: the run followed data flow only (``perfcast taint --no-control-flow``)."""
    library_database: str | None = None
    """The MPI library database the run used, when not perfcast's own ``mpi.json``."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"command": self.command}
        if self.spec is not None:
            data["spec"] = self.spec
        if self.point is not None:
            data["point"] = dict(self.point)
        if not self.control_flow:
            data["control_flow"] = False
        if self.library_database is not None:
            data["library_database"] = self.library_database
        return data


@dataclass(frozen=True, order=True)
class AlgorithmSwitch:
    """A parameter that decides a branch selecting work (an algorithm switch): the
    function's cost follows a different law on each side of the branch."""

    parameter: str
    function: str
    where: str
    """``file:line`` of the branch (the function's name where the file is unknown)."""


def switch_advice(parameter: str) -> str:
    """How to read models over an algorithm switch: said alike by ``perfcast taint``'s
    summary and the modeler's findings. The taint prior allows the parameter (the cost
    depends on it), but a PMNF term in it cannot express a different law per side."""
    return (
        f"one PMNF over {parameter} may fit poorly: model each value of {parameter} apart, "
        f"or read a break along {parameter} as a regime change"
    )


@dataclass(frozen=True)
class TaintProfile:
    """Which parameters drive each function's cost, from one taint run."""

    functions: Mapping[str, FunctionProfile]
    """Keyed by demangled name (``ns::f(int)``, ``main``, ``MPI_Allreduce``)."""
    parameters: Mapping[str, ParameterCoverage] = field(default_factory=dict)
    """The parameters the taint run marked."""
    pruned: tuple[str, ...] = ()
    """Proved constant by the static pre-pass (no loops, or constant trip counts only)."""
    constant: tuple[str, ...] = ()
    """Executed and instrumented, no parameter dependency."""
    not_executed: tuple[str, ...] = ()
    relevant: tuple[str, ...] | None = None
    """The functions whose cost depends on a parameter; None where the file has no list
    (a profile written by hand for modeling), which an instrumentation filter refuses."""
    unused_parameters: tuple[str, ...] = ()
    batches: tuple[tuple[str, ...], ...] = ()
    """The parameters of each label batch."""
    processes: int | None = None
    """Processes whose records were merged."""
    run: TaintRun | None = None
    warnings: tuple[str, ...] = ()

    def algorithm_switches(self) -> tuple[AlgorithmSwitch, ...]:
        """Every parameter that switches algorithms, where (:attr:`Branch.switches_work`):
        one source for the summary, the design and the modeler's findings."""
        return tuple(
            sorted(
                {
                    AlgorithmSwitch(parameter, name, f"{function.file or name}:{branch.line}")
                    for name, function in self.functions.items()
                    for branch in function.branches
                    if branch.switches_work
                    for parameter in branch.params
                }
            )
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": FORMAT,
            "parameters": {name: cov.to_json() for name, cov in self.parameters.items()},
            "functions": {name: entry.to_json() for name, entry in self.functions.items()},
            "pruned": list(self.pruned),
            "constant": list(self.constant),
            "not_executed": list(self.not_executed),
        }
        if self.relevant is not None:
            data["relevant"] = list(self.relevant)
        data["unused_parameters"] = list(self.unused_parameters)
        data["batches"] = [list(batch) for batch in self.batches]
        if self.processes is not None:
            data["processes"] = self.processes
        if self.run is not None:
            data["run"] = self.run.to_json()
        data["warnings"] = list(self.warnings)
        return data

    def save(self, path: PathLike, inputs: Iterable[PathLike] = ()) -> None:
        """Write the JSON atomically; never over one of ``inputs`` or a file that is not an
        earlier profile (:func:`perfcast.outputs.write_output`)."""
        write_output(path, json.dumps(self.to_json(), indent=1) + "\n", PROFILE_FILE, inputs)

    @classmethod
    def from_json(cls, data: Any, path: str | Path | None = None) -> TaintProfile:
        """A profile from its parsed JSON; InputError naming ``path`` and the key at fault."""
        return _Reader(path).profile(data)


def read_profile(path: Path) -> TaintProfile:
    """A taint profile from its JSON file; InputError naming the file when it is not one."""
    data = read_json(path, "taint profile", "write one with perfcast taint")
    return TaintProfile.from_json(data, path)


class _Reader(JsonChecker):
    """JSON to :class:`TaintProfile`, each error naming the key (``functions["main"].terms``).

    Required are only the keys a consumer cannot do without (``functions``, each one's
    ``terms`` and ``callpaths``, a call path's ``terms``, a branch's ``line`` and
    ``params``, a loop's ``line``, ``kind`` and ``params``); everything else has the
    default a run that found nothing would write, so a profile reduced by hand to what the
    modeler reads still loads.
    """

    def __init__(self, path: str | Path | None):
        super().__init__(path, "write the profile again with perfcast taint")

    def names(self, value: Any, where: str) -> tuple[str, ...]:
        return self.texts(value, where, "a list of names")

    def dependency(self, value: Any, where: str) -> Dependency:
        # type() over map(): this check runs for every call path, the bulk of a profile
        if not isinstance(value, list) or not all(
            type(term) is list and set(map(type, term)) <= {str} for term in value
        ):
            raise self.fail(where, "a list of parameter products (lists of parameter names)")
        return absorb(frozenset(term) for term in value)

    def version(self, data: Any) -> None:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        name, _, number = str(found).rpartition("/")
        if name == FORMAT_NAME and number.isdigit() and int(number) > VERSION:
            raise InputError(
                f"taint profile format version {number} is newer than this perfcast reads "
                f"(up to {VERSION}); update perfcast or write the profile again with this "
                "one's perfcast taint",
                path=self.path,
            )
        if found != FORMAT:
            raise InputError(
                f"not a perfcast taint profile (format {found!r}, expected {FORMAT!r}); write "
                "one with perfcast taint",
                path=self.path,
            )

    def profile(self, data: Any) -> TaintProfile:
        self.version(data)
        lists = {
            key: self.names(data[key], key)
            for key in ("pruned", "constant", "not_executed", "unused_parameters", "warnings")
            if key in data
        }
        functions = self.table(self.required(data, "functions", "the profile"), "functions")
        parameters = self.table(data.get("parameters", {}), "parameters")
        batches = data.get("batches", [])
        if not isinstance(batches, list):
            raise self.fail("batches", "a list of lists of names")
        processes = data.get("processes")
        return TaintProfile(
            functions={
                name: self.function(entry, f"functions[{json.dumps(name)}]")
                for name, entry in functions.items()
            },
            parameters={
                name: self.coverage(entry, f"parameters[{json.dumps(name)}]")
                for name, entry in parameters.items()
            },
            relevant=self.names(data["relevant"], "relevant") if "relevant" in data else None,
            batches=tuple(
                self.names(batch, f"batches[{index}]") for index, batch in enumerate(batches)
            ),
            processes=None
            if processes is None
            else self.integer(processes, "processes", "a number of processes"),
            run=None if data.get("run") is None else self.run(data["run"], "run"),
            **lists,
        )

    def coverage(self, entry: Any, where: str) -> ParameterCoverage:
        entry = self.table(entry, where)
        counts = {
            key: self.integer(entry[key], f"{where}.{key}", "a count")
            for key in ("loops", "functions", "branches", "switches")
            if key in entry
        }
        source = entry.get("source")
        return ParameterCoverage(
            source=None if source is None else self.text(source, f"{where}.source"),
            mpi=self.names(entry.get("mpi", []), f"{where}.mpi"),
            **counts,
        )

    def function(self, entry: Any, where: str) -> FunctionProfile:
        entry = self.table(entry, where)
        terms = self.dependency(self.required(entry, "terms", where), f"{where}.terms")
        callpaths = self.table(self.required(entry, "callpaths", where), f"{where}.callpaths")
        file, library, line = entry.get("file"), entry.get("library"), entry.get("line")
        if file is not None and not isinstance(file, str):
            raise self.fail(f"{where}.file", "a file name or null")
        if library is not None and not isinstance(library, str):
            raise self.fail(f"{where}.library", "a library name or null")
        branches = entry.get("branches", [])
        if not isinstance(branches, list):
            raise self.fail(f"{where}.branches", "a list")
        return FunctionProfile(
            file=file,
            line=None if line is None else self.integer(line, f"{where}.line", "a line number"),
            terms=terms,
            exclusive_terms=self.optional_dependency(entry, "exclusive_terms", where, terms),
            callpaths={
                path: self.callpath(value, f"{where}.callpaths[{json.dumps(path)}]")
                for path, value in callpaths.items()
            },
            library=library,
            loops=self.loops(entry.get("loops", []), f"{where}.loops"),
            branches=tuple(
                self.branch(branch, f"{where}.branches[{index}]")
                for index, branch in enumerate(branches)
            ),
            mpi=self.mpi(entry.get("mpi", {}), f"{where}.mpi"),
            recursive=self.flag(entry.get("recursive", False), f"{where}.recursive"),
        )

    def optional_dependency(
        self, entry: dict[str, Any], key: str, where: str, default: Dependency
    ) -> Dependency:
        return self.dependency(entry[key], f"{where}.{key}") if key in entry else default

    def callpath(self, entry: Any, where: str) -> CallpathProfile:
        entry = self.table(entry, where)
        terms = self.dependency(self.required(entry, "terms", where), f"{where}.terms")
        return CallpathProfile(
            terms=terms,
            exclusive_terms=self.optional_dependency(entry, "exclusive_terms", where, terms),
            visits=self.optional_dependency(entry, "visits_terms", where, CONSTANT),
            loops=self.loops(entry.get("loops", []), f"{where}.loops"),
            mpi=self.mpi(entry.get("mpi", {}), f"{where}.mpi"),
        )

    def loops(self, value: Any, where: str) -> tuple[Loop, ...]:
        if not isinstance(value, list):
            raise self.fail(where, "a list of loops")
        return tuple(self.loop(loop, f"{where}[{index}]") for index, loop in enumerate(value))

    def loop(self, entry: Any, where: str) -> Loop:
        entry = self.table(entry, where)
        executed = entry.get("executed")
        if executed is not None and not isinstance(executed, bool):
            raise self.fail(f"{where}.executed", "true, false or null")
        return Loop(
            line=self.integer(
                self.required(entry, "line", where), f"{where}.line", "a line number"
            ),
            kind=self.text(self.required(entry, "kind", where), f"{where}.kind"),
            params=self.names(self.required(entry, "params", where), f"{where}.params"),
            executed=executed,
            constant_bounds=self.flag(
                entry.get("constant_bounds", False), f"{where}.constant_bounds"
            ),
            loops=self.loops(entry.get("loops", []), f"{where}.loops"),
        )

    def mpi(self, value: Any, where: str) -> dict[str, LibraryUse]:
        uses = {}
        for routine, entry in self.table(value, where).items():
            inner = f"{where}[{json.dumps(routine)}]"
            entry = self.table(entry, inner)
            uses[routine] = LibraryUse(
                params=self.names(entry.get("params", []), f"{inner}.params"),
                calls=self.integer(entry.get("calls", 0), f"{inner}.calls", "a count"),
            )
        return uses

    def branch(self, entry: Any, where: str) -> Branch:
        entry = self.table(entry, where)
        exits = entry.get("exits_loops_at", [])
        if not isinstance(exits, list):
            raise self.fail(f"{where}.exits_loops_at", "a list of line numbers")
        return Branch(
            line=self.integer(
                self.required(entry, "line", where), f"{where}.line", "a line number"
            ),
            params=self.names(self.required(entry, "params", where), f"{where}.params"),
            in_loop=self.flag(entry.get("in_loop", False), f"{where}.in_loop"),
            exits_loops_at=tuple(
                self.integer(line, f"{where}.exits_loops_at[{index}]", "a line number")
                for index, line in enumerate(exits)
            ),
            evaluated=self.integer(entry.get("evaluated", 0), f"{where}.evaluated", "a count"),
            taken=self.integer(entry.get("taken", 0), f"{where}.taken", "a count"),
            calls=self.names(entry.get("calls", []), f"{where}.calls"),
            position=self.flag(entry.get("position", False), f"{where}.position"),
            selects_work=self.flag(entry.get("selects_work", False), f"{where}.selects_work"),
        )

    def run(self, entry: Any, where: str) -> TaintRun:
        entry = self.table(entry, where)
        spec, point = entry.get("spec"), entry.get("point")
        if point is not None:
            values = self.table(point, f"{where}.point")
            if not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in values.values()
            ):
                raise self.fail(f"{where}.point", "an object of parameter values")
        database = entry.get("library_database")
        return TaintRun(
            command=self.text(self.required(entry, "command", where), f"{where}.command"),
            spec=None if spec is None else self.text(spec, f"{where}.spec"),
            point=point,
            control_flow=self.flag(entry.get("control_flow", True), f"{where}.control_flow"),
            library_database=(
                None if database is None else self.text(database, f"{where}.library_database")
            ),
        )
