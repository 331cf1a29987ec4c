"""Taint profile meets measurements: priors per measured call path and validity flags.

Measured call paths are spelled the way the runtime or Score-P prints frames
(``main->sweep(double*, int)`` or ``main->sweep``); the profile keys functions by demangled
name and call paths by the same frames. :func:`match_profile` pairs them, and two checks of
the paper (section C) turn the profile into warnings on the fitted models:

* **C1, contention and noise** (:func:`contention_warnings`): a model fitted *without* the
  prior that uses a parameter the code provably cannot depend on measured something other
  than the code's work -- resource contention, noise, a system effect.
* **C2, algorithm switches** (:func:`algorithm_switch_warnings`): a branch decided by a
  parameter can select different code -- in the function, or which callees it calls -- at
  different parameter values, so one PMNF formula may not describe the whole measured range.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.names import name_list
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.prior import Prior
from perfcast.modeling.prior_conflicts import VISITS_METRIC, PriorConflict, resolve_conflict
from perfcast.taint.priors import (
    SOURCE,
    callpath_terms,
    function_priors_from_profile,
    prior_from_terms,
    priors_from_profile,
)

_QUALIFIERS = re.compile(r"\)(?:\s*(?:const|volatile|&&|&))*\s*$")


def function_name(frame: str) -> str:
    """A frame without its argument list and trailing qualifiers.

    ``sweep(double*, int)`` -> ``sweep``; ``Grid::cells() const`` -> ``Grid::cells``;
    ``operator()(int)`` -> ``operator()``. Why: runtimes print frames with or without
    argument lists, and C functions have none in the profile.
    """
    text = _QUALIFIERS.sub(")", frame.strip())
    if not text.endswith(")"):
        return text
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[index], 0)
        if depth == 0:
            head = text[:index].rstrip()
            return head if head and not head.endswith("operator") else text
    return text


def normalise_callpath(callpath: str) -> str:
    """A call path with every frame reduced to its function name."""
    return join_callpath(function_name(frame) for frame in split_callpath(callpath))


@dataclass
class TaintMatch:
    """How a profile's entries map onto an experiment's call paths.

    Attributes:
        priors: measured call path -> prior.
        functions: measured call path -> the profile functions its last frame names.
        by_function: call paths matched by their last frame only (the profile never saw
            that exact path; the function's merged dependency is used).
        unmatched: call paths the profile knows nothing about; modeled without prior.
        dropped_parameters: profile parameters the experiment holds fixed.
        absorbed: (exclusive priors) measured call path -> callees in the profile that the
            measurement does not show (inlined or filtered out), whose cost it includes.
    """

    priors: dict[str, Prior] = field(default_factory=dict)
    functions: dict[str, list[str]] = field(default_factory=dict)
    by_function: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    dropped_parameters: list[str] = field(default_factory=list)
    absorbed: dict[str, list[str]] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """What the user must know about the match; never silent about a gap."""
        notes = []
        if self.dropped_parameters:
            notes.append(
                f"taint profile parameters {self.dropped_parameters} are not parameters of "
                "the experiment (held fixed); they are dropped from the priors"
            )
        if self.absorbed:
            listed = "; ".join(f"{c}: {', '.join(v)}" for c, v in self.absorbed.items())
            notes.append(
                f"{len(self.absorbed)} exclusive prior(s) include callees not measured on "
                f"their own (inlined or filtered out): {listed}"
            )
        if self.by_function:
            notes.append(
                f"{len(self.by_function)} call path(s) not in the taint profile, matched by "
                f"function name: {name_list(self.by_function)}"
            )
        if self.unmatched:
            notes.append(
                f"{len(self.unmatched)} call path(s) unknown to the taint profile, modeled "
                f"without prior: {name_list(self.unmatched)}"
            )
        return notes


def match_profile(
    profile: Mapping[str, Any], experiment: Experiment, *, inclusive: bool = True
) -> TaintMatch:
    """Priors for the experiment's call paths: by full call path, else by function name.

    Raises:
        InputError: the experiment has parameters the taint run did not mark -- the priors
            would exclude them from every model, so the profile cannot be used as is.
    """
    parameters = experiment.parameters
    by_path = priors_from_profile(profile, parameters=parameters, inclusive=inclusive)
    known = list(profile.get("parameters", {}))
    unmarked = [p for p in experiment.parameters if p not in known]
    if unmarked:
        raise InputError(
            f"experiment parameters {unmarked} were not marked in the taint run (the profile "
            f"has {known}); mark them (perfcast taint --param NAME=argv:N or "
            "perfcast_register) and run perfcast taint again"
        )
    match = TaintMatch(dropped_parameters=[p for p in known if p not in experiment.parameters])
    by_function = function_priors_from_profile(profile, parameters=parameters, inclusive=inclusive)
    path_owner: dict[str, list[str]] = {}
    normalised: dict[str, list[str]] = {}
    entries: dict[str, Mapping[str, Any]] = {}
    for name, function in profile["functions"].items():
        for callpath, entry in function["callpaths"].items():
            path_owner.setdefault(callpath, []).append(name)
            normalised.setdefault(normalise_callpath(callpath), []).append(callpath)
            entries[callpath] = entry

    # Exclusive metrics of a measured path include callees the measurement does not show
    # (inlined by the compiler, or left out by an instrumentation filter); library routines
    # are measured by their wrappers, never inside the caller.
    library_paths = {
        c
        for function in profile["functions"].values()
        if function.get("file") is None
        for c in function["callpaths"]
    }
    seen = {normalise_callpath(c) for c in experiment.callpaths}
    children: dict[str, list[str]] = {}
    for callpath in entries:
        frames = split_callpath(callpath)
        if len(frames) > 1:
            children.setdefault(join_callpath(frames[:-1]), []).append(callpath)

    def hidden_children(path: str) -> list[str]:
        """Profile call paths below ``path`` whose cost a measurement of ``path`` includes."""
        found = []
        for child in children.get(path, []):
            if normalise_callpath(child) not in seen and child not in library_paths:
                found += [child, *hidden_children(child)]
        return found

    def caller_entry(callpath: str) -> Mapping[str, Any] | None:
        """The profile's entry of the call path's caller, if it has exactly one."""
        frames = split_callpath(callpath)
        if len(frames) < 2:
            return None
        parent = join_callpath(frames[:-1])
        found = [parent] if parent in entries else normalised.get(normalise_callpath(parent), [])
        return entries[found[0]] if len(found) == 1 else None

    names: dict[str, list[str]] = {}
    for name in profile["functions"]:
        names.setdefault(function_name(name), []).append(name)

    # Functions the static pre-pass pruned have no entry: constant per call, but called as
    # often as the caller's loops around the call say (any of them: the site is not known).
    constant = {
        function_name(n) for n in [*profile.get("pruned", []), *profile.get("constant", [])]
    }
    for callpath in experiment.callpaths:
        candidates = (
            [callpath] if callpath in by_path else normalised.get(normalise_callpath(callpath), [])
        )
        if len(candidates) == 1:
            match.priors[callpath] = by_path[candidates[0]]
            match.functions[callpath] = path_owner[candidates[0]]
            hidden = hidden_children(candidates[0])
            if not inclusive and hidden:
                terms = [
                    t
                    for c in [candidates[0], *hidden]
                    for t in callpath_terms(entries[c], inclusive=False)
                ]
                match.priors[callpath] = prior_from_terms(terms, parameters)
                match.absorbed[callpath] = [split_callpath(c)[-1] for c in hidden]
            continue
        owners = names.get(function_name(split_callpath(callpath)[-1]), [])
        if len(candidates) > 1:  # overloads print alike once argument lists are gone
            owners = sorted({o for c in candidates for o in path_owner[c]})
        if not owners:
            caller = caller_entry(callpath)
            if function_name(split_callpath(callpath)[-1]) in constant and caller is not None:
                visits = callpath_terms(caller, inclusive=False)
                match.priors[callpath] = prior_from_terms(visits, parameters)
            elif (
                function_name(split_callpath(callpath)[-1]) in constant
                and len(split_callpath(callpath)) == 1
            ):
                match.priors[callpath] = Prior.constant(SOURCE)
            else:
                match.unmatched.append(callpath)
            continue
        if len(owners) == 1:
            match.priors[callpath] = by_function[owners[0]]
        else:  # the loosest restriction every candidate allows
            functions = profile["functions"]
            terms = [
                t
                for o in owners
                for entry in functions[o]["callpaths"].values()
                for t in callpath_terms(entry, inclusive=inclusive)
            ]
            match.priors[callpath] = prior_from_terms(terms, parameters)
        match.functions[callpath] = owners
        match.by_function.append(callpath)
    return match


def branch_parameters(profile: Mapping[str, Any], callpath: str) -> frozenset[str]:
    """Parameters that decide a branch on the way to ``callpath``'s code.

    A branch decided by ``p`` lets ``p`` reach the code even where no loop bound depends on
    it: ``if (has_neighbour_below) send(...)`` sends as often as the rank's position and
    ``p`` say. Counted: every branch of the call path's own function and of its caller
    (which decides how often a library routine such as ``MPI_Wait`` runs, often through a
    count set in branches, an implicit flow the taint labels of the call itself miss), and
    further up the branches that guard the call to the next frame.
    """
    functions = profile.get("functions", {})
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for name, function in functions.items():
        by_name.setdefault(function_name(name), []).append(function)
    frames = [function_name(f) for f in split_callpath(callpath)]
    found: set[str] = set()
    for index, frame in enumerate(frames):
        callee = frames[index + 1] if index + 1 < len(frames) else None
        near = index >= len(frames) - 2  # the function itself or its caller
        for function in by_name.get(frame, []):
            for branch in function.get("branches", []):
                guarded = {function_name(c) for c in branch.get("calls", [])}
                if near or callee in guarded:
                    found |= set(branch.get("params", []))
    return frozenset(found)


def unreachable_parameters(
    profile: Mapping[str, Any], match: TaintMatch, callpath: str, parameters: Iterable[str]
) -> frozenset[str]:
    """Of ``parameters``, those the code of ``callpath`` provably cannot depend on: its
    taint prior rules them out (no loop bound) and no branch on the way decides by them.
    Empty for a call path without a taint prior (nothing is known)."""
    prior = match.priors.get(callpath)
    if prior is None:
        return frozenset()
    reaching = branch_parameters(profile, callpath)
    return frozenset(p for p in parameters if not prior.allows_parameter(p) and p not in reaching)


def contention_warnings(
    free: ModelSet, match: TaintMatch, profile: Mapping[str, Any] | None = None
) -> dict[tuple[str, str], list[str]]:
    """Paper C1: parameters a prior-free model uses that the code cannot depend on.

    ``free`` are models fitted without priors; the warnings are keyed by (call path, metric)
    so they can be attached to the models actually reported. With ``profile``, a parameter
    that decides a branch on the way to the code (:func:`branch_parameters`) reaches it and
    is never flagged.
    """
    warnings: dict[tuple[str, str], list[str]] = {}
    for model in free:
        if model.callpath not in match.priors:
            continue
        prior = match.priors[model.callpath]
        unreachable = (
            unreachable_parameters(profile, match, model.callpath, model.parameters)
            if profile is not None
            else {p for p in model.parameters if not prior.allows_parameter(p)}
        )
        for parameter in model.parameters:
            if parameter in unreachable:
                warnings.setdefault((model.callpath, model.metric), []).append(
                    f"depends on {parameter}, which the code cannot: contention or noise "
                    f"(taint analysis; black-box model: {model.text()})"
                )
    return warnings


def algorithm_switch_warnings(
    profile: Mapping[str, Any], experiment: Experiment, match: TaintMatch
) -> dict[str, list[str]]:
    """Paper C2: parameter-decided branches that may switch algorithms across the range.

    A branch is a possible switch on a parameter ``X`` when

    * it is not a guard that exits a loop (those bound trip counts, which the dependency
      already models),
    * its outcome was uniform in the taint run (always or never taken): the parameter's
      value, not the data visited in a loop, chose the path -- a branch with mixed outcomes
      splits work per iteration rather than switching algorithms, and
    * ``X`` takes more than one value in the experiment, so the measured range may
      straddle the branch's threshold.

    Such a branch flags the call path of its own function (it selects code inside it), and
    every call path through a call it guards: ``if (n < 4) kernel_linear(n); else
    kernel_log(n);`` in ``foo`` flags ``foo``, ``foo->kernel_linear`` and everything below
    it. The taint run saw one parameter value, so this flags *possible* switches only.
    """
    varying = {p for p in experiment.parameters if experiment.data[p].nunique(dropna=True) > 1}
    functions = profile["functions"]
    by_name: dict[str, list[str]] = {}
    for name in functions:
        by_name.setdefault(function_name(name), []).append(name)

    def switches(name: str) -> list[tuple[dict[str, Any], str, list[str]]]:
        """(branch, where, parameters) of the possible switches in one function."""
        function = functions[name]
        found = []
        for branch in function.get("branches", []):
            if branch.get("exits_loops_at"):
                continue
            evaluated, taken = branch.get("evaluated", 0), branch.get("taken", 0)
            if evaluated and 0 < taken < evaluated:
                continue
            parameters = [p for p in branch["params"] if p in varying]
            if parameters:
                where = f"{function.get('file') or name}:{branch['line']}"
                found.append((branch, where, parameters))
        return found

    warnings: dict[str, list[str]] = {}

    def flag(callpath: str, text: str) -> None:
        if text not in warnings.setdefault(callpath, []):
            warnings[callpath].append(text)

    for callpath, owners in match.functions.items():
        for name in owners:
            for _, where, parameters in switches(name):
                for parameter in parameters:
                    flag(
                        callpath,
                        f"possible algorithm switch on {parameter}: the branch at {where} "
                        f"is decided by {parameter}",
                    )
    for callpath in experiment.callpaths:
        frames = [function_name(f) for f in split_callpath(callpath)]
        for caller, callee in itertools.pairwise(frames):
            for name in by_name.get(caller, []):
                for branch, where, parameters in switches(name):
                    if callee not in {function_name(c) for c in branch.get("calls", [])}:
                        continue
                    for parameter in parameters:
                        flag(
                            callpath,
                            f"possible algorithm switch on {parameter}: the branch at {where} "
                            f"in {caller}, decided by {parameter}, selects whether {callee} "
                            "runs",
                        )
    return warnings


def resolve_taint_conflicts(
    models: ModelSet, free: ModelSet, profile: Mapping[str, Any], match: TaintMatch
) -> list[PriorConflict]:
    """Where a taint-prior model conflicts with its measurements (its fit is much worse
    than the black-box one, or the measured visits use a parameter it rules out), put the
    better model in ``models`` (in place) and return the conflicts
    (:mod:`perfcast.modeling.prior_conflicts`: thresholds and why).

    The issue this guards against: a halo exchange whose neighbour count follows the
    rank's position and ``p`` through branches got a constant taint prior (no loop reads
    ``p``) and collapsed to a constant model, unnoticed. ``models`` were fitted under
    ``match.priors``, ``free`` without priors.
    """
    conflicts = []
    visits = {m.callpath: m for m in free if m.metric == VISITS_METRIC}
    for model in list(models):
        key = (model.callpath, model.metric)
        prior = match.priors.get(model.callpath)
        if prior is None or key not in free:
            continue
        kept, conflict = resolve_conflict(
            model,
            free[key],
            prior,
            source=SOURCE,
            visits=visits.get(model.callpath),
            unreachable=unreachable_parameters(
                profile, match, model.callpath, free[key].parameters
            ),
        )
        if conflict is not None:
            models.add(kept)
            conflicts.append(conflict)
    return conflicts


def flag_models(
    models: ModelSet,
    free: ModelSet | None,
    profile: Mapping[str, Any],
    experiment: Experiment,
    match: TaintMatch,
) -> None:
    """Attach the C1 and C2 warnings to ``models`` (in place)."""
    contention = contention_warnings(free if free is not None else models, match, profile)
    switches = algorithm_switch_warnings(profile, experiment, match)
    for model in models:
        model.warnings.extend(contention.get((model.callpath, model.metric), []))
        model.warnings.extend(switches.get(model.callpath, []))
