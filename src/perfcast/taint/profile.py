"""From run-time records to the taint profile (format: README.md in this package).

The dependency of a call path is built over its loop-nest tree (paper section 4.2): a loop
multiplies the labels of its exit conditions with everything inside it, items in sequence
add, and a call composes the callee's dependency at the point of the call. Taint gives the
parameters of a loop's trip count, not the function of them, so a dependency is a sum of
*products of parameter sets*: ``size*p + iters``. Exponents are left to the modeler; terms
contained in a larger term are absorbed (``n*m + n`` is ``n*m``: every model the first
allows, the second allows too).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath
from perfcast.taint.libdb import LibraryDatabase
from perfcast.taint.records import Context, ContextRecord, RunRecords
from perfcast.taint.sitemap import Function, SiteMap

FORMAT = "perfcast-taint-profile/1"

Term = frozenset[str]
Dependency = frozenset[Term]
CONSTANT: Dependency = frozenset({frozenset()})


def absorb(terms: Iterable[Term]) -> Dependency:
    unique = set(terms)
    kept = {t for t in unique if not any(t < other for other in unique)}
    return frozenset(kept or {frozenset()})


def add(*parts: Dependency) -> Dependency:
    return absorb(t for part in parts for t in part)


def multiply(labels: Term, inner: Dependency) -> Dependency:
    return absorb(labels | t for t in inner)


def render(dependency: Dependency) -> str:
    """``size*p + iters``; ``1`` for a constant."""
    terms = sorted((sorted(t) for t in dependency if t), key=lambda t: (-len(t), t))
    return " + ".join("*".join(t) for t in terms) or "1"


def terms_json(dependency: Dependency) -> list[list[str]]:
    return sorted((sorted(t) for t in dependency if t), key=lambda t: (-len(t), t))


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
        self.records = records
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

    def _dependency(self, node: _Node, *, inclusive: bool) -> Dependency:
        function, record = node.function, node.record
        loop_labels = self._loop_labels(function, record)

        def scope(loop: int | None) -> Dependency:
            parts: list[Dependency] = [CONSTANT]
            for child_loop in function.loops:
                if child_loop.parent == loop and child_loop.index in loop_labels:
                    inner = scope(child_loop.index)
                    parts.append(multiply(frozenset(loop_labels[child_loop.index]), inner))
            if inclusive:
                key = -1 if loop is None else loop
                for child in node.children:
                    if child.context[-1][1] == key:
                        parts.append(self._dependency(child, inclusive=True))
                for (routine, call_loop), call in record.calls.items():
                    if call_loop == key:
                        parts.append(frozenset({self._call_params(routine, call.labels)}))
            return add(*parts)

        return scope(None)

    def _loop_tree(self, function: Function, labels: dict[int, set[str]]) -> list[dict[str, Any]]:
        def subtree(parent: int | None) -> list[dict[str, Any]]:
            return [
                {
                    "line": loop.line,
                    "kind": loop.kind,
                    "params": sorted(labels.get(loop.index, ())),
                    "executed": (
                        loop.index in labels if function.loop_labels_sites(loop.index) else None
                    ),
                    "constant_bounds": loop.constant,
                    "loops": subtree(loop.index),
                }
                for loop in function.loops
                if loop.parent == parent
            ]

        return subtree(None)

    def _branches(self, function: Function, record: ContextRecord) -> list[dict[str, Any]]:
        lines = {loop.index: loop.line for loop in function.loops}
        out = []
        for site in function.sites:
            observed = record.sites.get(site.index)
            if site.kind != "branch" or observed is None or not observed.labels:
                continue
            out.append(
                {
                    "line": site.line,
                    "params": sorted(observed.labels),
                    "in_loop": site.loop is not None,
                    "exits_loops_at": sorted(lines[i] for i in site.exits),
                    "evaluated": observed.count,
                    "taken": observed.taken,
                    "calls": site.calls,
                }
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
        return join_callpath(self.functions[fid].name for fid, _ in context)

    def build(self, batches: list[list[str]], sources: dict[str, str]) -> dict[str, Any]:
        per_path: dict[str, dict[str, Any]] = {}
        function_paths: dict[str, list[str]] = defaultdict(list)
        library: dict[str, dict[str, Any]] = {}
        warnings: list[str] = []
        recursive: set[str] = set()

        def visit(node: _Node, visits: Dependency) -> None:
            path = self._path(node.context)
            name = node.function.name
            labels = self._loop_labels(node.function, node.record)
            inclusive = self._dependency(node, inclusive=True)
            exclusive = self._dependency(node, inclusive=False)
            entry = per_path.get(path)
            if node.record.recursive:
                recursive.add(name)
            if entry is None:
                entry = per_path[path] = {
                    "function": name,
                    "dep": inclusive,
                    "exc": exclusive,
                    "labels": labels,
                    "branches": self._branches(node.function, node.record),
                    "mpi": {},
                    "visits": visits,
                }
                function_paths[name].append(path)
            else:
                entry["dep"] = add(entry["dep"], inclusive)
                entry["exc"] = add(entry["exc"], exclusive)
                entry["visits"] = add(entry["visits"], visits)
                for loop, found in labels.items():
                    entry["labels"].setdefault(loop, set()).update(found)
            for (routine, call_loop), call in node.record.calls.items():
                params = self._call_params(routine, call.labels)
                mpi = entry["mpi"].setdefault(routine, {"params": set(), "calls": 0})
                mpi["params"] |= params
                mpi["calls"] += call.count
                lib = library.setdefault(routine, {"params": set(), "callpaths": {}, "visits": {}})
                lib["params"] |= params
                lib_path = join_callpath([path, routine])
                lib["callpaths"].setdefault(lib_path, set()).update(params)
                called = multiply(_enclosing_labels(node.function, labels, call_loop), visits)
                lib["visits"][lib_path] = add(lib["visits"].get(lib_path, frozenset()), called)
            for child in node.children:
                site = child.context[-1][1]
                visit(child, multiply(_enclosing_labels(node.function, labels, site), visits))

        for root in self._tree():
            visit(root, CONSTANT)

        functions: dict[str, Any] = {}
        executed = set(function_paths)
        for function in self.sitemap.functions:
            if function.name not in executed:
                continue
            paths = function_paths[function.name]
            entries = [per_path[p] for p in paths]
            dep = add(*(e["dep"] for e in entries))
            exc = add(*(e["exc"] for e in entries))
            merged_labels: dict[int, set[str]] = defaultdict(set)
            for e in entries:
                for loop, found in e["labels"].items():
                    merged_labels[loop] |= found
            functions[function.name] = {
                "file": function.file,
                "line": function.line,
                "params": sorted(set().union(*dep)),
                "dependency": render(dep),
                "terms": terms_json(dep),
                "exclusive_dependency": render(exc),
                "exclusive_terms": terms_json(exc),
                "loops": self._loop_tree(function, merged_labels),
                "branches": _merge_branches(e["branches"] for e in entries),
                "mpi": _mpi_json(entries),
                "recursive": function.name in recursive,
                "callpaths": {
                    p: {
                        "params": sorted(set().union(*per_path[p]["dep"])),
                        "dependency": render(per_path[p]["dep"]),
                        "terms": terms_json(per_path[p]["dep"]),
                        "exclusive_dependency": render(per_path[p]["exc"]),
                        "exclusive_terms": terms_json(per_path[p]["exc"]),
                        "loops": self._loop_tree(function, per_path[p]["labels"]),
                        "mpi": _mpi_json([per_path[p]]),
                        "visits": render(per_path[p]["visits"]),
                        "visits_terms": terms_json(per_path[p]["visits"]),
                    }
                    for p in paths
                },
            }
        for routine, lib in sorted(library.items()):
            term = frozenset(lib["params"])
            functions[routine] = {
                "file": None,
                "line": None,
                "library": self.database.library,
                "params": sorted(term),
                "dependency": render(absorb([term])),
                "terms": terms_json(absorb([term])),
                "exclusive_dependency": render(absorb([term])),
                "exclusive_terms": terms_json(absorb([term])),
                "loops": [],
                "branches": [],
                "mpi": {},
                "recursive": False,
                "callpaths": {
                    p: {
                        "params": sorted(params),
                        "dependency": render(absorb([frozenset(params)])),
                        "terms": terms_json(absorb([frozenset(params)])),
                        "visits": render(lib["visits"][p]),
                        "visits_terms": terms_json(lib["visits"][p]),
                    }
                    for p, params in sorted(lib["callpaths"].items())
                },
            }
        parameters = self._coverage(functions, batches, sources)
        unused = sorted(n for n, c in parameters.items() if not c["loops"] and not c["mpi"])
        for name in unused:
            warnings.append(
                f"parameter {name} reaches no loop condition and no MPI call in this run: "
                "it does not change the cost of any function; leave it out of the model"
            )
        for name in sorted(recursive):
            warnings.append(
                f"{name} is recursive: its dependency over-approximates (recursion depth is "
                "not a loop the analysis sees)"
            )
        user = [f for f in self.sitemap.functions if f.name in functions]
        return {
            "format": FORMAT,
            "parameters": parameters,
            "functions": functions,
            "pruned": sorted({f.name for f in self.sitemap.functions if f.pruned}),
            "constant": sorted(f.name for f in user if functions[f.name]["dependency"] == "1"),
            "not_executed": sorted(
                {f.name for f in self.sitemap.functions if not f.pruned} - executed
            ),
            "relevant": sorted(f.name for f in user if functions[f.name]["dependency"] != "1"),
            "unused_parameters": unused,
            "batches": batches,
            "processes": self.records.processes,
            "warnings": warnings,
        }

    def _coverage(
        self, functions: dict[str, Any], batches: list[list[str]], sources: dict[str, str]
    ) -> dict[str, dict[str, Any]]:
        names = [n for batch in batches for n in batch]
        implicit = self.database.implicit_process_parameter
        if implicit not in names and any(
            implicit in entry["params"] for entry in functions.values() if entry["file"] is None
        ):  # p enters through a collective's cost law even if MPI_Comm_size is never called
            names.append(implicit)
            sources = {implicit: f"{self.database.library} library database", **sources}
        coverage: dict[str, dict[str, Any]] = {
            n: {
                "source": sources.get(n, "perfcast_register"),
                "loops": 0,
                "functions": 0,
                "branches": 0,
                "mpi": [],
            }
            for n in names
        }
        for name, entry in functions.items():
            if entry["file"] is None:
                for param in entry["params"]:
                    if param in coverage:
                        coverage[param]["mpi"].append(name)
                continue
            direct: set[str] = set()
            for loop in _walk(entry["loops"]):
                for param in loop["params"]:
                    coverage[param]["loops"] += 1
                    direct.add(param)
            for param in direct:
                coverage[param]["functions"] += 1
            for branch in entry["branches"]:
                for param in branch["params"]:
                    coverage[param]["branches"] += 1
        return coverage


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


def _walk(loops: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for loop in loops:
        yield loop
        yield from _walk(loop["loops"])


def _merge_branches(lists: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per branch line: labels united, counts added over call paths."""
    merged: dict[int, dict[str, Any]] = {}
    for branches in lists:
        for branch in branches:
            target = merged.get(branch["line"])
            if target is None:
                merged[branch["line"]] = dict(branch)
                continue
            target["params"] = sorted(set(target["params"]) | set(branch["params"]))
            target["calls"] = sorted(set(target["calls"]) | set(branch["calls"]))
            target["evaluated"] += branch["evaluated"]
            target["taken"] += branch["taken"]
    return [merged[line] for line in sorted(merged)]


def _mpi_json(entries: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, dict[str, Any]] = {}
    for e in entries:
        for routine, info in e["mpi"].items():
            target = merged.setdefault(routine, {"params": set(), "calls": 0})
            target["params"] |= info["params"]
            target["calls"] += info["calls"]
    return {
        r: {"params": sorted(v["params"]), "calls": v["calls"]} for r, v in sorted(merged.items())
    }


def read_profile(path: Path) -> dict[str, Any]:
    """A taint profile from its JSON file; InputError naming the file when it is not one.

    Everything the commands later read from it (functions, their terms and call paths,
    branches, the name lists) is checked here, so a damaged or hand-edited profile is
    refused with the key at fault instead of failing deep inside design, build or model.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the taint profile: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not a taint profile: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); write one with perfcast taint",
            path=path,
        ) from None
    try:
        profile = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        reason = str(exc).split(";")[0]  # not Python's advice on raising the limit
        raise InputError(f"not a taint profile: {reason}", path=path) from None
    except RecursionError:
        raise InputError(
            "not a taint profile: JSON nested too deeply; write one with perfcast taint",
            path=path,
        ) from None
    if not isinstance(profile, dict) or profile.get("format") != FORMAT:
        found = profile.get("format") if isinstance(profile, dict) else type(profile).__name__
        raise InputError(
            f"not a perfcast taint profile (format {found!r}, expected {FORMAT!r}); write one "
            "with perfcast taint",
            path=path,
        )
    _ProfileCheck(path).profile(profile)
    return profile


class _ProfileCheck:
    """The shape of a profile's JSON, each error naming the key (``functions["main"].terms``)."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, what: str) -> InputError:
        return InputError(
            f"{where} must be {what}; write the profile again with perfcast taint",
            path=self.path,
        )

    def table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "a JSON object")
        return value

    def required(self, table: dict[str, Any], key: str, where: str) -> Any:
        if key not in table:
            raise InputError(
                f"{where} has no {key!r}; write the profile again with perfcast taint",
                path=self.path,
            )
        return table[key]

    def names(self, value: Any, where: str) -> None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, "a list of names")

    def terms(self, value: Any, where: str) -> None:
        if not isinstance(value, list) or not all(
            isinstance(term, list) and all(isinstance(n, str) for n in term) for term in value
        ):
            raise self.fail(where, "a list of parameter products (lists of parameter names)")

    def optional_terms(self, entry: dict[str, Any], where: str) -> None:
        for key in ("exclusive_terms", "visits_terms"):
            if key in entry:
                self.terms(entry[key], f"{where}.{key}")

    def profile(self, profile: dict[str, Any]) -> None:
        if "parameters" in profile:
            self.table(profile["parameters"], "parameters")
        for key in ("relevant", "not_executed", "pruned", "constant", "warnings"):
            if key in profile:
                self.names(profile[key], key)
        functions = self.table(self.required(profile, "functions", "the profile"), "functions")
        for name, function in functions.items():
            self.function(function, f"functions[{json.dumps(name)}]")

    def function(self, function: Any, where: str) -> None:
        self.table(function, where)
        self.terms(self.required(function, "terms", where), f"{where}.terms")
        self.optional_terms(function, where)
        if function.get("file") is not None and not isinstance(function["file"], str):
            raise self.fail(f"{where}.file", "a file name or null")
        if "params" in function:
            self.names(function["params"], f"{where}.params")
        if "dependency" in function and not isinstance(function["dependency"], str):
            raise self.fail(f"{where}.dependency", "a string")
        callpaths = self.required(function, "callpaths", where)
        for callpath, entry in self.table(callpaths, f"{where}.callpaths").items():
            inner = f"{where}.callpaths[{json.dumps(callpath)}]"
            self.table(entry, inner)
            self.terms(self.required(entry, "terms", inner), f"{inner}.terms")
            self.optional_terms(entry, inner)
        branches = function.get("branches", [])
        if not isinstance(branches, list):
            raise self.fail(f"{where}.branches", "a list")
        for index, branch in enumerate(branches):
            self.branch(branch, f"{where}.branches[{index}]")

    def branch(self, branch: Any, where: str) -> None:
        self.table(branch, where)
        self.names(self.required(branch, "params", where), f"{where}.params")
        line = self.required(branch, "line", where)
        if not isinstance(line, int) or isinstance(line, bool):
            raise self.fail(f"{where}.line", "a line number")
        for key in ("evaluated", "taken"):
            value = branch.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool):
                raise self.fail(f"{where}.{key}", "a count")
        if not isinstance(branch.get("exits_loops_at", []), list):
            raise self.fail(f"{where}.exits_loops_at", "a list of line numbers")
        if "calls" in branch:
            self.names(branch["calls"], f"{where}.calls")
