"""perf-taint's JSON results as a perfcast taint profile (``perfcast taint import``).

Users of perf-taint (the LLVM tool of the paper) already have its results; importing them
lets ``perfcast model --taint``, ``design`` and ``build --filter`` use them without a second
taint run. perf-taint writes two forms, both read here:

* **the run's output** (``app_0.json``, one per rank): per function a list of distinct
  *instances*, each with the ``callstacks`` it was seen on (function indices, callers
  first) and an ``instance`` tree -- loops with the label sets of their exit conditions
  (``params``) and branches, nested loops, and references
  ``{"function_idx", "entry_id"}`` to the callee instance a call inside produced. The
  dependency is composed as perfcast composes its own: a loop multiplies its labels with
  everything inside it, items in sequence add, a reference contributes the callee's
  dependency. The loops around a reference also give the callee's call path its
  ``visits``, so the priors bound a call path's total as for a profile of perfcast's own.
* **JSONConverter's output** (the file perf-taint hands to Extra-P): per call stack the
  composed ``deps``. It no longer says where calls sit in loops, so a call path's visits
  are bounded through its caller's total (looser, never too tight); the run's output is
  better.

Function names are spelled as perfcast's taint run and Score-P spell them: the mangled
symbols of ``functions_mangled_names`` go through ``c++filt`` (libiberty, the demangler
perfcast taint uses for its keys and Score-P for its region names), so
``_Z1fPdm`` is ``f(double*, unsigned long)``; C names, ``main`` and MPI routines are
themselves. Where no demangler is installed, perf-taint's own ``functions_demangled_names``
(``__cxa_demangle``, the same spelling in a libstdc++ build) are used. Call paths join
those names with ``->`` (``main->f(double*, unsigned long)``).

Every value read is checked; a malformed file is an InputError naming the file and the key
(``functions["_Z1fPdm"].loops[0].instance["0"].params``). Strings are data: names become
keys, never code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.clang_toolchain import demangle
from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath
from perfcast.inputs import JsonChecker, read_json
from perfcast.taint.profile_model import (
    CONSTANT,
    CallpathProfile,
    Dependency,
    FunctionProfile,
    ParameterCoverage,
    TaintProfile,
    TaintRun,
    Term,
    absorb,
    add,
    multiply,
    product,
)

KIND = "perf-taint result"
HINT = "give the JSON a perf-taint run wrote (app_0.json) or JSONConverter's output"
LIBRARY_PREFIXES = ("MPI_", "PMPI_")
"""perf-taint's implicit functions: library routines (its JSONConverter tells them apart
by the same prefix)."""

Stack = tuple[int, ...]
"""A call path as perf-taint writes it: function indices, root first, the function last."""


def import_perftaint(path: Path) -> TaintProfile:
    """The taint profile of perf-taint's result file ``path``; InputError naming the file
    and the key at fault when it is not one."""
    data = read_json(path, KIND, HINT)
    try:
        return _Importer(path).profile(data)
    except RecursionError:  # loop trees or call chains deeper than Python's stack
        raise InputError(
            f"not a {KIND}: loops or calls nested too deeply to compose; {HINT}", path=path
        ) from None


@dataclass(frozen=True)
class _Reference:
    """A call inside an instance: the callee's instance and the labels of the loops
    around the call (they multiply the callee's visits)."""

    function: int
    entry: int
    around: Term


@dataclass
class _Instance:
    """One entry of a function's ``loops`` list: the call stacks it was seen on, its loop
    tree and the calls in it (or, in JSONConverter's form, its composed ``deps``)."""

    stacks: list[Stack]
    references: list[_Reference] = field(default_factory=list)
    tree: dict[str, Any] | None = None
    """The run's ``instance`` (None in JSONConverter's form, which gives ``deps``)."""
    deps: Dependency = CONSTANT


@dataclass
class _Function:
    index: int
    key: str
    file: str | None
    line: int | None
    instances: list[_Instance]
    library: bool
    """One of perf-taint's implicit functions (an MPI routine): no file, a library prefix."""
    branches: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    """Parameter -> the branches it decides (loop position and branch number: the same
    branch in several instances counts once)."""


class _Importer(JsonChecker):
    """perf-taint's JSON to :class:`TaintProfile` (module docstring)."""

    def __init__(self, path: Path):
        super().__init__(path, HINT)
        self.functions: dict[int, _Function] = {}
        self.names: list[str] = []
        self.recursive: set[int] = set()
        self.memo: dict[tuple[int, int, bool], Dependency] = {}
        self.composing: set[tuple[int, int, bool]] = set()
        self.loops: dict[str, set[tuple[int, tuple[str, ...]]]] = {}
        """Parameter -> the loops it bounds (function, position in its loop-nest tree)."""

    # -- reading ------------------------------------------------------------------------

    def profile(self, data: Any) -> TaintProfile:
        data = self.table(data, "the file")
        mangled = self.texts(
            self.required(data, "functions_mangled_names", "the file"),
            "functions_mangled_names",
            "a list of symbol names",
        )
        shown = self.texts(
            data.get("functions_demangled_names", list(mangled)),
            "functions_demangled_names",
            "a list of names",
        )
        if len(shown) != len(mangled):
            raise self.fail(
                "functions_demangled_names", "as long as functions_mangled_names (one per index)"
            )
        spelled = demangle(mangled)
        self.names = [
            spelled.get(m, s if m.startswith("_Z") else m)
            for m, s in zip(mangled, shown, strict=True)
        ]
        used = self.texts(data.get("parameters", []), "parameters", "a list of parameter names")
        unused = self.texts(
            data.get("unused_parameters", []), "unused_parameters", "a list of parameter names"
        )
        functions = self.table(self.required(data, "functions", "the file"), "functions")
        for key, entry in functions.items():
            function = self.function(key, entry, mangled)
            self.functions[function.index] = function
        quiet = [
            self.names[self.index(key, entry, mangled, "unimportant_functions")]
            for key, entry in self.table(
                data.get("unimportant_functions", {}), "unimportant_functions"
            ).items()
        ]
        for function in self.functions.values():
            for number, instance in enumerate(function.instances):
                self.check_references(function, number, instance)
        return self.build(used, unused, quiet)

    def index(self, key: str, entry: Any, mangled: tuple[str, ...], table: str) -> int:
        """``entry["func_idx"]``, checked to be the index of ``key`` in the name lists
        (perf-taint's call stacks and references use these indices)."""
        owner = f"{table}[{json.dumps(key)}]"
        entry = self.table(entry, owner)
        where = f"{owner}.func_idx"
        index = self.integer(self.required(entry, "func_idx", owner), where, "a function index")
        if not 0 <= index < len(mangled) or mangled[index] != key:
            raise self.fail(where, f"the index of {key!r} in functions_mangled_names")
        return index

    def function(self, key: str, entry: Any, mangled: tuple[str, ...]) -> _Function:
        where = f"functions[{json.dumps(key)}]"
        entry = self.table(entry, where)
        index = self.index(key, entry, mangled, "functions")
        file, line = entry.get("file"), entry.get("line")
        if file is not None and not isinstance(file, str):
            raise self.fail(f"{where}.file", "a file name or null")
        loops = self.required(entry, "loops", where)
        if not isinstance(loops, list):
            raise self.fail(f"{where}.loops", "a list of instances")
        function = _Function(
            index=index,
            key=key,
            file=file,
            line=None if line is None else self.integer(line, f"{where}.line", "a line number"),
            instances=[],
            library=file is None and mangled[index].startswith(LIBRARY_PREFIXES),
        )
        for number, value in enumerate(loops):
            function.instances.append(self.instance(function, value, f"{where}.loops[{number}]"))
        return function

    def instance(self, function: _Function, value: Any, where: str) -> _Instance:
        value = self.table(value, where)
        if "instance" in value:  # the run's output
            stacks = self.stacks(self.required(value, "callstacks", where), f"{where}.callstacks")
            tree = self.table(value["instance"], f"{where}.instance")
            instance = _Instance(stacks=stacks, tree=tree)
            self.sequence(function, instance, tree, f"{where}.instance", frozenset(), ())
            return instance
        if "deps" in value:  # JSONConverter's output
            stacks = self.stacks(self.required(value, "callstack", where), f"{where}.callstack")
            deps = value["deps"]
            if not isinstance(deps, list) or not all(
                isinstance(t, list) and all(isinstance(n, str) for n in t) for t in deps
            ):
                raise self.fail(f"{where}.deps", "a list of parameter products (lists of names)")
            terms = absorb(frozenset(t) for t in deps) if deps else CONSTANT
            return _Instance(stacks=stacks, deps=terms)
        raise InputError(
            f"{where} has neither 'instance' (a perf-taint run's output) nor 'deps' "
            f"(JSONConverter's); {HINT}",
            path=self.path,
        )

    def stacks(self, value: Any, where: str) -> list[Stack]:
        if not isinstance(value, list):
            raise self.fail(where, "a list of call stacks (lists of function indices or null)")
        stacks: list[Stack] = []
        for number, stack in enumerate(value):
            inner = f"{where}[{number}]"
            if stack is None:  # the root: no callers
                stacks.append(())
                continue
            if not isinstance(stack, list):
                raise self.fail(inner, "a list of function indices or null")
            stacks.append(
                tuple(self.function_index(i, f"{inner}[{k}]") for k, i in enumerate(stack))
            )
        return stacks

    def function_index(self, value: Any, where: str) -> int:
        index = self.integer(value, where, "a function index")
        if not 0 <= index < len(self.names):
            raise self.fail(
                where, f"an index into functions_mangled_names (0 to {len(self.names) - 1})"
            )
        return index

    def sequence(
        self,
        function: _Function,
        instance: _Instance,
        items: Any,
        where: str,
        around: Term,
        position: tuple[str, ...],
    ) -> None:
        """Checks a ``{position: loop | [references]}`` table, collecting the references
        (with the labels of the loops around them) and the coverage counts."""
        for key, item in self.table(items, where).items():
            inner = f"{where}[{json.dumps(key)}]"
            if isinstance(item, list):
                for number, reference in enumerate(item):
                    instance.references.append(
                        self.reference(reference, f"{inner}[{number}]", around)
                    )
            else:
                self.loop(function, instance, item, inner, around, (*position, key))

    def reference(self, value: Any, where: str, around: Term) -> _Reference:
        value = self.table(value, where)
        return _Reference(
            function=self.function_index(
                self.required(value, "function_idx", where), f"{where}.function_idx"
            ),
            entry=self.integer(
                self.required(value, "entry_id", where), f"{where}.entry_id", "an instance number"
            ),
            around=around,
        )

    def loop(
        self,
        function: _Function,
        instance: _Instance,
        value: Any,
        where: str,
        around: Term,
        position: tuple[str, ...],
    ) -> None:
        value = self.table(value, where)
        labels = self.labels(value, where)
        if not function.library:  # a routine's entry is its cost law, not a loop
            for name in labels:
                self.loops.setdefault(name, set()).add((function.index, position))
        branches = self.table(value.get("branches", {}), f"{where}.branches")
        for number, names in branches.items():
            inner = f"{where}.branches[{json.dumps(number)}]"
            for name in self.texts(names, inner, "a list of parameter names"):
                function.branches.setdefault(name, set()).add((*position, number))
        if "loops" in value:
            self.sequence(
                function, instance, value["loops"], f"{where}.loops", around | labels, position
            )

    def labels(self, loop: dict[str, Any], where: str) -> Term:
        """The labels of a loop's exit conditions: one product (perfcast's rule and
        perf-taint's JSONConverter's: a condition with several labels multiplies them)."""
        sets = loop.get("params", [])
        if not isinstance(sets, list) or not all(
            isinstance(s, list) and all(isinstance(n, str) for n in s) for s in sets
        ):
            raise self.fail(f"{where}.params", "a list of label sets (lists of parameter names)")
        return frozenset(name for names in sets for name in names)

    def check_references(self, function: _Function, number: int, instance: _Instance) -> None:
        for reference in instance.references:
            callee = self.functions.get(reference.function)
            if callee is None or not 0 <= reference.entry < len(callee.instances):
                raise InputError(
                    f"functions[{json.dumps(function.key)}].loops[{number}] refers to instance "
                    f"{reference.entry} of function {reference.function} "
                    f"({self.names[reference.function]!r}), which the file does not have; {HINT}",
                    path=self.path,
                )

    # -- composing ----------------------------------------------------------------------

    def cost(self, index: int, entry: int, *, inclusive: bool) -> Dependency:
        """One call's dependency. A reference back into an instance still being composed
        (recursion) counts as constant work and marks the function recursive."""
        key = (index, entry, inclusive)
        if key in self.memo:
            return self.memo[key]
        if key in self.composing:
            self.recursive.add(index)
            return CONSTANT
        instance = self.functions[index].instances[entry]
        if instance.tree is None:
            return instance.deps
        self.composing.add(key)
        result = self.tree_cost(instance.tree, inclusive=inclusive)
        self.composing.discard(key)
        self.memo[key] = result
        return result

    def tree_cost(self, items: dict[str, Any], *, inclusive: bool) -> Dependency:
        parts = []
        for item in items.values():
            if isinstance(item, list):
                parts += [
                    self.cost(r["function_idx"], r["entry_id"], inclusive=True)
                    if inclusive
                    else CONSTANT
                    for r in item
                ]
            else:
                inner = self.tree_cost(item.get("loops", {}), inclusive=inclusive)
                labels = frozenset(n for names in item.get("params", []) for n in names)
                parts.append(multiply(labels, inner))
        return add(*parts) if parts else CONSTANT

    def visits(self) -> dict[Stack, Dependency]:
        """How often each call path runs: the loops around its call sites, up the path.
        In JSONConverter's form (no call sites) :func:`_visits_within` bounds it."""
        found: dict[Stack, list[tuple[Stack, Term]]] = {}
        for function in self.functions.values():
            for instance in function.instances:
                for stack in instance.stacks:
                    here = (*stack, function.index)
                    for reference in instance.references:
                        found.setdefault((*here, reference.function), []).append(
                            (here, reference.around)
                        )
        totals = self.path_terms()  # per call
        memo: dict[Stack, Dependency] = {}

        def visits_of(path: Stack, seen: frozenset[Stack]) -> Dependency:
            if path in memo:
                return memo[path]
            if len(path) < 2 or path in seen:
                return CONSTANT
            calls = found.get(path)
            if calls:
                result = add(
                    *(
                        product(visits_of(caller, seen | {path}), frozenset({around}))
                        for caller, around in calls
                    )
                )
            else:  # no call site known: bounded through the caller's total
                caller = path[:-1]
                total = product(visits_of(caller, seen | {path}), totals.get(caller, CONSTANT))
                # a caller perf-taint recorded no instance of (reached from its callee's
                # stack) has no known total, like the caller's own above: a constant
                result = _visits_within(total, totals.get(path, CONSTANT))
            memo[path] = result
            return result

        return {path: visits_of(path, frozenset()) for path in totals}

    def path_terms(self) -> dict[Stack, Dependency]:
        """Each call path's inclusive dependency per call (its instances added)."""
        terms: dict[Stack, list[Dependency]] = {}
        for function in self.functions.values():
            for number, instance in enumerate(function.instances):
                cost = self.cost(function.index, number, inclusive=True)
                for stack in instance.stacks:
                    terms.setdefault((*stack, function.index), []).append(cost)
        return {path: add(*parts) for path, parts in terms.items()}

    def build(
        self, used: tuple[str, ...], unused: tuple[str, ...], quiet: list[str]
    ) -> TaintProfile:
        visits = self.visits()
        profiles: dict[str, FunctionProfile] = {}
        warnings = []
        mpi_params: dict[str, set[str]] = {}
        for function in self.functions.values():
            name = self.names[function.index]
            callpaths: dict[str, CallpathProfile] = {}
            for number, instance in enumerate(function.instances):
                inclusive = self.cost(function.index, number, inclusive=True)
                exclusive = (
                    self.cost(function.index, number, inclusive=False)
                    if instance.tree is not None
                    else inclusive
                )
                for stack in instance.stacks:
                    path = (*stack, function.index)
                    callpath = join_callpath(self.names[i] for i in path)
                    before = callpaths.get(callpath)
                    callpaths[callpath] = CallpathProfile(
                        terms=add(inclusive, before.terms) if before else inclusive,
                        exclusive_terms=add(exclusive, before.exclusive_terms)
                        if before
                        else exclusive,
                        visits=visits[path],
                    )
            library = function.library
            entry = FunctionProfile(
                file=None if library else function.file or "",
                line=function.line,
                terms=add(*(c.terms for c in callpaths.values())) if callpaths else CONSTANT,
                exclusive_terms=add(*(c.exclusive_terms for c in callpaths.values()))
                if callpaths
                else CONSTANT,
                callpaths=callpaths,
                library="MPI" if library else None,
                recursive=function.index in self.recursive,
            )
            if library:
                for parameter in frozenset().union(*entry.terms):
                    mpi_params.setdefault(parameter, set()).add(name)
            if name in profiles:
                warnings.append(
                    f"two perf-taint functions are spelled {name!r} (static functions of "
                    "different files?): merged into one entry"
                )
                entry = _merge(profiles[name], entry)
            profiles[name] = entry
            if function.branches:
                listed = ", ".join(
                    f"{p} ({len(found)})" for p, found in sorted(function.branches.items())
                )
                warnings.append(
                    f"{name}: perf-taint counted parameter-dependent branches, decided by "
                    f"{listed}, without source lines; they are not imported, so the "
                    "algorithm-switch check (C2) does not see them"
                )
        if any(i.tree is None for f in self.functions.values() for i in f.instances):
            warnings.append(
                "JSONConverter's output does not say where calls sit in loops: each call "
                "path's visits are bounded through its caller's total (looser priors); "
                "import a perf-taint run's output (app_0.json) for exact visits"
            )
        parameters = {
            name: ParameterCoverage(
                source="MPI_Comm_size" if name == "p" else "perf-taint register_variable",
                loops=len(self.loops.get(name, ())),
                functions=len({index for index, _ in self.loops.get(name, ())}),
                branches=sum(len(f.branches.get(name, ())) for f in self.functions.values()),
                mpi=tuple(sorted(mpi_params.get(name, ()))),
            )
            for name in dict.fromkeys([*used, *unused])
        }
        # perf-taint's own verdict: the functions it wrote are its performance-relevant ones
        relevant = tuple(n for n, f in profiles.items() if not f.is_library)
        return TaintProfile(
            functions=profiles,
            parameters=parameters,
            constant=tuple(dict.fromkeys(n for n in quiet if n not in profiles)),
            relevant=relevant,
            unused_parameters=unused,
            processes=1,
            run=TaintRun(command=f"imported from perf-taint {self.path}"),
            warnings=tuple(warnings),
        )


def _visits_within(caller_total: Dependency, terms: Dependency) -> Dependency:
    """A bound on a callee's visits when only its caller's total is known: each product of
    the caller's total without a term of the callee it contains (caller ``n*m + p``, callee
    ``m``: ``n``). The callee's work is part of its caller's, so every product of the true
    total (visits x terms) lies within one of the caller's, and that one's quotient by the
    callee's term is among these: the bound is never tighter than the truth."""
    quotients = [whole - part for whole in caller_total for part in terms if part <= whole]
    return absorb(quotients) if quotients else caller_total


def _merge(first: FunctionProfile, second: FunctionProfile) -> FunctionProfile:
    callpaths = dict(first.callpaths)
    for path, entry in second.callpaths.items():
        if path in callpaths:
            old = callpaths[path]
            entry = CallpathProfile(
                terms=add(old.terms, entry.terms),
                exclusive_terms=add(old.exclusive_terms, entry.exclusive_terms),
                visits=add(old.visits, entry.visits),
            )
        callpaths[path] = entry
    return FunctionProfile(
        file=first.file,
        line=first.line,
        terms=add(first.terms, second.terms),
        exclusive_terms=add(first.exclusive_terms, second.exclusive_terms),
        callpaths=callpaths,
        library=first.library,
        recursive=first.recursive or second.recursive,
    )


__all__ = ["import_perftaint"]
