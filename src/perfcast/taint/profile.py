"""From run-time records to the taint profile (format: README.md in this package; the typed
profile and its reader: :mod:`perfcast.taint.profile_model`).

The dependency of a call path is built over its loop-nest tree (paper section 4.2): a loop
multiplies the labels of its exit conditions with everything inside it, items in sequence
add, and a call composes the callee's dependency at the point of the call. Taint gives the
parameters of a loop's trip count, not the function of them, so a dependency is a sum of
*products of parameter sets*: ``size*p + iters``. Exponents are left to the modeler; terms
contained in a larger term are absorbed (``n*m + n`` is ``n*m``: every model the first
allows, the second allows too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from perfcast.experiment.calltree import join_callpath
from perfcast.taint.libdb import LibraryDatabase
from perfcast.taint.profile_model import (
    CONSTANT,
    Branch,
    CallpathProfile,
    Dependency,
    FunctionProfile,
    LibraryUse,
    Loop,
    ParameterCoverage,
    TaintProfile,
    Term,
    add,
    multiply,
    parameters_of,
    symbol_name,
)
from perfcast.taint.records import Context, ContextRecord, RunRecords
from perfcast.taint.sitemap import Function, SiteMap


@dataclass
class _Node:
    """One calling context with everything needed to compose dependencies."""

    context: Context
    function: Function
    record: ContextRecord
    children: list[_Node] = field(default_factory=list)


class ProfileBuilder:
    def __init__(self, sitemap: SiteMap, records: RunRecords, database: LibraryDatabase):
        self.sitemap = sitemap
        self.functions = sitemap.by_fid()
        self.records = _without_positions(records, database.position_labels)
        self.database = database

    # ---- per context ----------------------------------------------------------------------
    def _loop_labels(self, function: Function, record: ContextRecord) -> dict[int, set[str]]:
        labels: dict[int, set[str]] = {}
        for loop in function.loops:
            observed = [
                record.sites[s] for s in function.loop_labels_sites(loop.index) if s in record.sites
            ]
            if observed:
                labels[loop.index] = set().union(*(s.labels for s in observed))
        return labels

    def _call_params(self, routine: str, labels: set[str]) -> Term:
        return frozenset(self.database.routine_parameters(routine, labels))

    @staticmethod
    def _switch_labels(function: Function, record: ContextRecord, sites: Iterable[int]) -> Term:
        """Labels of the algorithm switches among the branch ``sites`` in this context:
        what the work under them is control-dependent on. Only branches that select work
        count (``if (seed == 0) seed = 1;`` changes a value, not a cost), with one outcome
        in the run (LULESH's ``if (... && cycle() != 0)`` around an ``MPI_Allreduce``
        carries ``iterations`` but tells the first step from the others: progress, not the
        parameter's value, chose), and not those the rank's position decides (they tell
        ranks apart, not runs)."""
        found: set[str] = set()
        for index in sites:
            observed = record.sites.get(index)
            if (
                function.sites[index].work
                and observed is not None
                and not observed.positional
                and not 0 < observed.taken < observed.count
            ):
                found |= observed.labels
        return frozenset(found)

    def _dependency(self, node: _Node, *, inclusive: bool) -> Dependency:
        """A loop multiplies its exit labels, and those of the algorithm switches whose arms
        hold it, with what runs inside it; a call under such a switch is multiplied by its
        labels; and each switch adds its own labels as a term, whichever side ran: the
        cost depends on the parameters that choose which code runs (``if (mode > 2)``
        picking an O(n) or an O(n^2) loop gives ``mode*n``)."""
        function, record = node.function, node.record
        loop_labels = self._loop_labels(function, record)

        def switched(sites: Iterable[int], dependency: Dependency) -> Dependency:
            return multiply(self._switch_labels(function, record, sites), dependency)

        def call_switches(site: int) -> list[int]:
            return function.call_branches[site] if 0 <= site < len(function.call_branches) else []

        def scope(loop: int | None) -> Dependency:
            parts: list[Dependency] = [CONSTANT]
            for child_loop in function.loops:
                if child_loop.parent == loop and child_loop.index in loop_labels:
                    inner = scope(child_loop.index)
                    bound = multiply(frozenset(loop_labels[child_loop.index]), inner)
                    parts.append(switched(child_loop.branches, bound))
            for site in function.sites:
                if site.kind == "branch" and site.loop == loop:
                    parts.append(switched([site.index, *site.branches], CONSTANT))
            if inclusive:
                key = -1 if loop is None else loop
                for child in node.children:
                    _, call_loop, call_site = child.context[-1]
                    if call_loop == key:
                        callee = self._dependency(child, inclusive=True)
                        parts.append(switched(call_switches(call_site), callee))
                for (routine, call_loop, call_site), call in record.calls.items():
                    if call_loop == key:
                        params = frozenset({self._call_params(routine, call.labels)})
                        parts.append(switched(call_switches(call_site), params))
            return add(*parts)

        return scope(None)

    def _loop_tree(self, function: Function, labels: dict[int, set[str]]) -> tuple[Loop, ...]:
        def subtree(parent: int | None) -> tuple[Loop, ...]:
            return tuple(
                Loop(
                    line=loop.line,
                    kind=loop.kind,
                    params=tuple(sorted(labels.get(loop.index, ()))),
                    executed=(
                        loop.index in labels if function.loop_labels_sites(loop.index) else None
                    ),
                    constant_bounds=loop.constant,
                    loops=subtree(loop.index),
                )
                for loop in function.loops
                if loop.parent == parent
            )

        return subtree(None)

    def _branches(self, function: Function, record: ContextRecord) -> list[Branch]:
        lines = {loop.index: loop.line for loop in function.loops}
        out = []
        for site in function.sites:
            observed = record.sites.get(site.index)
            if site.kind != "branch" or observed is None or not observed.labels:
                continue
            out.append(
                Branch(
                    line=site.line,
                    params=tuple(sorted(observed.labels)),
                    in_loop=site.loop is not None,
                    exits_loops_at=tuple(sorted(lines[i] for i in site.exits)),
                    evaluated=observed.count,
                    taken=observed.taken,
                    calls=tuple(site.calls),
                    position=observed.positional,
                    selects_work=site.work,
                )
            )
        return out

    # ---- assembly -----------------------------------------------------------------------
    def _tree(self) -> list[_Node]:
        nodes: dict[Context, _Node] = {}
        for context in sorted(self.records.contexts, key=len):
            function = self.functions.get(context[-1][0])
            if function is None:
                continue
            node = _Node(context, function, self.records.contexts[context])
            nodes[context] = node
            parent = nodes.get(context[:-1])
            if parent is not None:
                parent.children.append(node)
        return [n for n in nodes.values() if len(n.context) == 1 or n.context[:-1] not in nodes]

    def _path(self, context: Context) -> str:
        return join_callpath(self.functions[fid].name for fid, *_ in context)

    def build(self, batches: list[list[str]], sources: dict[str, str]) -> TaintProfile:
        per_path: dict[str, _PathState] = {}
        function_paths: dict[str, list[str]] = defaultdict(list)
        library: dict[str, _RoutineState] = {}
        recursive: set[str] = set()

        def visit(node: _Node, visits: Dependency) -> None:
            path = self._path(node.context)
            name = node.function.name
            labels = self._loop_labels(node.function, node.record)
            if node.record.recursive:
                recursive.add(name)
            state = per_path.get(path)
            branches = self._branches(node.function, node.record)
            if state is None:
                state = per_path[path] = _PathState(branches=branches)
                function_paths[name].append(path)
            else:  # another call site of the same call path: its branches count too
                state.branches = list(_merge_branches([state.branches, branches]))
            state.dep = add(state.dep, self._dependency(node, inclusive=True))
            state.exc = add(state.exc, self._dependency(node, inclusive=False))
            state.visits = add(state.visits, visits)
            for loop, found in labels.items():
                state.labels[loop] |= found
            self._library_calls(node, path, labels, visits, state, library)
            for child in node.children:
                site = child.context[-1][1]
                visit(child, multiply(_enclosing_labels(node.function, labels, site), visits))

        for root in self._tree():
            visit(root, CONSTANT)

        functions: dict[str, FunctionProfile] = {}
        for function in self.sitemap.functions:
            paths = function_paths.get(function.name)
            if paths is not None:
                functions[function.name] = self._function(
                    function, {p: per_path[p] for p in paths}, function.name in recursive
                )
        for routine, routine_state in sorted(library.items()):
            functions[routine] = self._routine(routine_state)
        parameters = self._coverage(functions, batches, sources)
        unused = sorted(
            n for n, c in parameters.items() if not c.loops and not c.mpi and not c.switches
        )
        unmarked = (
            []
            if parameters
            else [
                "no parameter was marked in this run (no --param binding, no "
                "perfcast_register, no MPI_Comm_size): every function is reported as "
                "constant; mark the parameters to model (perfcast taint --param NAME=argv:N)"
            ]
        )
        warnings = (
            unmarked
            + [self._unused_warning(name, parameters[name]) for name in unused]
            + [
                f"{name} is recursive: its dependency over-approximates (recursion depth is "
                "not a loop the analysis sees)"
                for name in sorted(recursive)
            ]
            + self._same_name_warnings()
        )
        user = [f for f in self.sitemap.functions if f.name in functions]
        return TaintProfile(
            parameters=parameters,
            functions=functions,
            pruned=tuple(sorted({f.name for f in self.sitemap.functions if f.pruned})),
            constant=tuple(sorted(f.name for f in user if functions[f.name].terms == CONSTANT)),
            not_executed=tuple(
                sorted(
                    {f.name for f in self.sitemap.functions if not f.pruned} - set(function_paths)
                )
            ),
            relevant=tuple(sorted(f.name for f in user if functions[f.name].terms != CONSTANT)),
            unused_parameters=tuple(unused),
            batches=tuple(tuple(batch) for batch in batches),
            processes=self.records.processes,
            warnings=tuple(warnings),
        )

    def _unused_warning(self, name: str, coverage: ParameterCoverage) -> str:
        """Why a parameter reached no loop and no MPI call. Where its label reached a branch
        it was alive and bounds nothing; where it reached nothing at all, a lost label (a
        value read by a routine the analysis cannot follow) is far likelier than a
        parameter the user put in the run command changing nothing, so it is not dropped."""
        if coverage.branches:
            return (
                f"parameter {name} decides {coverage.branches} branch(es), none of which "
                "selects a loop or a call of a function with loops, and bounds no loop and "
                "enters no MPI call in this run: it changes no function's cost, so perfcast "
                "design holds it at its base value"
            )
        routines = sorted(self.records.reads.get(name, ()))
        if routines:
            seen = f"last seen where {', '.join(routines)} read its value"
        elif coverage.source and coverage.source.startswith(("argv:", "flag:")):
            seen = (
                f"last seen on the command line ({coverage.source}); no atoi, atol, atoll, "
                "atof, sscanf or std::istream::operator>> read it"
            )
        else:
            seen = f"last seen where it was marked ({coverage.source or 'unknown'})"
        return (
            f"parameter {name} reaches no loop condition, no branch and no MPI call in this "
            f"run: its label was probably lost, {seen}. A value parsed inside a library "
            "the analysis does not follow (std::from_chars, wide-character streams) or by "
            "the program's own parser loses its label: mark the variable once it is read "
            f'(perfcast_register(&var, "{name}")). perfcast design keeps {name} at all its '
            "values"
        )

    def _same_name_warnings(self) -> list[str]:
        """Definitions that print alike (``static`` functions of two files), kept apart as
        ``NAME [FILE]``: say so, since measurements cannot."""
        by_symbol: defaultdict[str, list[Function]] = defaultdict(list)
        for function in self.sitemap.functions:
            if symbol_name(function.name) != function.name:
                by_symbol[symbol_name(function.name)].append(function)
        return [
            f"{len(found)} functions are named {symbol} "
            f"({', '.join(f'{f.file}:{f.line}' for f in found)}): the profile keeps them "
            f"apart as {', '.join(f.name for f in found)}; measurements name each {symbol}, "
            f"so a measured call path through {symbol} gets their dependencies added"
            for symbol, found in sorted(by_symbol.items())
        ]

    def _library_calls(
        self,
        node: _Node,
        path: str,
        labels: dict[int, set[str]],
        visits: Dependency,
        state: _PathState,
        library: dict[str, _RoutineState],
    ) -> None:
        """Account the library calls a context makes: in its call path's entry (the routine
        and its parameters) and in the routine's (one call path per caller, with visits)."""
        for (routine, call_loop, _), call in node.record.calls.items():
            params = self._call_params(routine, call.labels)
            state.mpi[routine].add(params, call.count)
            routine_state = library.setdefault(routine, _RoutineState())
            routine_state.terms = add(routine_state.terms, frozenset({params}))
            lib_path = join_callpath([path, routine])
            routine_state.callpaths[lib_path] = add(
                routine_state.callpaths[lib_path], frozenset({params})
            )
            called = multiply(_enclosing_labels(node.function, labels, call_loop), visits)
            routine_state.visits[lib_path] = add(routine_state.visits[lib_path], called)

    def _function(
        self, function: Function, paths: dict[str, _PathState], recursive: bool
    ) -> FunctionProfile:
        """A function of the program: its call paths, and their union for the function."""
        merged_labels: dict[int, set[str]] = defaultdict(set)
        for state in paths.values():
            for loop, found in state.labels.items():
                merged_labels[loop] |= found
        return FunctionProfile(
            file=function.file,
            line=function.line,
            terms=add(*(state.dep for state in paths.values())),
            exclusive_terms=add(*(state.exc for state in paths.values())),
            loops=self._loop_tree(function, merged_labels),
            branches=_merge_branches(state.branches for state in paths.values()),
            mpi=_library_uses(paths.values()),
            recursive=recursive,
            callpaths={
                path: CallpathProfile(
                    terms=state.dep,
                    exclusive_terms=state.exc,
                    visits=state.visits,
                    loops=self._loop_tree(function, state.labels),
                    mpi=_library_uses([state]),
                )
                for path, state in paths.items()
            },
        )

    def _routine(self, state: _RoutineState) -> FunctionProfile:
        """A library routine: its cost law's parameters, per call path and merged. Calls from
        different call sites add (an Allreduce of ``a`` values and one of ``b`` values cost
        ``a + b``), as every call site is a context of its own."""
        return FunctionProfile(
            file=None,
            line=None,
            library=self.database.library,
            terms=state.terms,
            exclusive_terms=state.terms,
            callpaths={
                path: CallpathProfile(terms=terms, exclusive_terms=terms, visits=state.visits[path])
                for path, terms in sorted(state.callpaths.items())
            },
        )

    def _coverage(
        self,
        functions: dict[str, FunctionProfile],
        batches: list[list[str]],
        sources: dict[str, str],
    ) -> dict[str, ParameterCoverage]:
        positions = self.database.position_labels
        names = [n for batch in batches for n in batch if n not in positions]
        implicit = self.database.implicit_process_parameter
        if implicit not in names and _library_parameters(functions) & {implicit}:
            # p enters through a collective's cost law even if MPI_Comm_size is never called
            names.append(implicit)
            sources = {implicit: f"{self.database.library} library database", **sources}
        loops: dict[str, int] = dict.fromkeys(names, 0)
        owners: dict[str, int] = dict.fromkeys(names, 0)
        branches: dict[str, int] = dict.fromkeys(names, 0)
        switches: dict[str, int] = dict.fromkeys(names, 0)
        mpi: dict[str, list[str]] = {n: [] for n in names}
        for name, entry in functions.items():
            if entry.is_library:
                for param in set(parameters_of(entry.terms)) & set(mpi):
                    mpi[param].append(name)
                continue
            direct: set[str] = set()
            for loop in (inner for top in entry.loops for inner in top.walk()):
                for param in loop.params:
                    loops[param] += 1
                    direct.add(param)
            for param in direct:
                owners[param] += 1
            for branch in entry.branches:
                for param in branch.params:
                    branches[param] += 1
                    switches[param] += branch.switches_work
        return {
            n: ParameterCoverage(
                source=sources.get(n, "perfcast_register"),
                loops=loops[n],
                functions=owners[n],
                branches=branches[n],
                mpi=tuple(mpi[n]),
                switches=switches[n],
            )
            for n in names
        }


@dataclass
class _Uses:
    """Calls to one library routine, accumulated over contexts."""

    params: set[str] = field(default_factory=set)
    calls: int = 0

    def add(self, params: Iterable[str], calls: int) -> None:
        self.params |= set(params)
        self.calls += calls


@dataclass
class _PathState:
    """One call path's dependencies, accumulated over the contexts that print as it."""

    branches: list[Branch]
    dep: Dependency = CONSTANT
    exc: Dependency = CONSTANT
    visits: Dependency = CONSTANT
    labels: defaultdict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    mpi: defaultdict[str, _Uses] = field(default_factory=lambda: defaultdict(_Uses))


@dataclass
class _RoutineState:
    """A library routine's dependency, per call path and merged, and its visits."""

    terms: Dependency = CONSTANT
    callpaths: defaultdict[str, Dependency] = field(
        default_factory=lambda: defaultdict(lambda: CONSTANT)
    )
    visits: defaultdict[str, Dependency] = field(default_factory=lambda: defaultdict(frozenset))


def _library_parameters(functions: dict[str, FunctionProfile]) -> set[str]:
    """The parameters the library routines' cost laws name."""
    return {
        name
        for entry in functions.values()
        if entry.is_library
        for term in entry.terms
        for name in term
    }


def _enclosing_labels(function: Function, labels: dict[int, set[str]], loop: int) -> Term:
    """Labels of ``loop`` and every loop around it: what multiplies the executions of a
    call made inside it (``-1``: outside any loop)."""
    parents = {lp.index: lp.parent for lp in function.loops}
    found: set[str] = set()
    current: int | None = loop if loop >= 0 else None
    while current is not None:
        found |= labels.get(current, set())
        current = parents.get(current)
    return frozenset(found)


def _merge_branches(lists: Iterable[list[Branch]]) -> tuple[Branch, ...]:
    """One entry per branch line: labels united, counts added over call paths."""
    merged: dict[int, Branch] = {}
    for branches in lists:
        for branch in branches:
            target = merged.get(branch.line)
            merged[branch.line] = (
                branch
                if target is None
                else replace(
                    target,
                    params=tuple(sorted({*target.params, *branch.params})),
                    calls=tuple(sorted({*target.calls, *branch.calls})),
                    evaluated=target.evaluated + branch.evaluated,
                    taken=target.taken + branch.taken,
                    position=target.position or branch.position,
                )
            )
    return tuple(merged[line] for line in sorted(merged))


def _library_uses(states: Iterable[_PathState]) -> dict[str, LibraryUse]:
    merged: defaultdict[str, _Uses] = defaultdict(_Uses)
    for state in states:
        for routine, uses in state.mpi.items():
            merged[routine].add(uses.params, uses.calls)
    return {
        routine: LibraryUse(params=tuple(sorted(uses.params)), calls=uses.calls)
        for routine, uses in sorted(merged.items())
    }


def _without_positions(records: RunRecords, positions: frozenset[str]) -> RunRecords:
    """The records with position labels (``rank``) taken off every condition and call.

    A rank's position decides which neighbours a process talks to and where its share of
    the data starts, so it reaches loop bounds (``for (i = first; i < first + n; i++)``)
    and branches (``if (colLoc == tp - 1)``), but it is not a parameter of the run: no
    model has a ``rank`` term. A branch whose condition carried it keeps the mark
    (:attr:`SiteRecord.positional`): it tells boundary ranks from interior ones, which is
    not an algorithm switch between runs."""
    if not positions:
        return records
    contexts = {}
    for context, record in records.contexts.items():
        sites = {
            index: replace(
                site,
                labels=site.labels - positions,
                positional=site.positional or bool(site.labels & positions),
            )
            for index, site in record.sites.items()
        }
        calls = {
            key: replace(call, labels=call.labels - positions) for key, call in record.calls.items()
        }
        contexts[context] = replace(record, sites=sites, calls=calls)
    return replace(
        records,
        tracked=[name for name in records.tracked if name not in positions],
        untracked=records.untracked - positions,
        contexts=contexts,
    )
