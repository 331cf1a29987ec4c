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
from collections.abc import Iterable
from dataclasses import dataclass, field

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.names import name_list
from perfcast.modeling.findings import Finding
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.prior import Prior
from perfcast.taint.priors import (
    SOURCE,
    function_priors_from_profile,
    prior_from_terms,
    priors_from_profile,
)
from perfcast.taint.profile_model import (
    Branch,
    CallpathProfile,
    Dependency,
    FunctionProfile,
    TaintProfile,
    add,
    measured_callpath,
    switch_advice,
    symbol_name,
)

_QUALIFIERS = re.compile(r"\)(?:\s*(?:const|volatile|&&|&))*\s*$")


def without_arguments(frame: str) -> str:
    """A frame without its argument list and trailing qualifiers.

    ``sweep(double*, int)`` -> ``sweep``; ``Grid::cells() const`` -> ``Grid::cells``;
    ``operator()(int)`` -> ``operator()``; ``helper [a.c]`` -> ``helper``. Why: runtimes
    print frames with or without argument lists, and C functions have none in the profile;
    they never print the file a profile adds to keep same-named ``static`` functions apart
    (:func:`~perfcast.taint.profile_model.symbol_name`). Template arguments stay, unlike in
    :func:`perfcast.experiment.names.function_name`, which shortens them for display.
    """
    text = _QUALIFIERS.sub(")", symbol_name(frame).strip())
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
    return join_callpath(without_arguments(frame) for frame in split_callpath(callpath))


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
    profile: TaintProfile, experiment: Experiment, *, inclusive: bool = True
) -> TaintMatch:
    """Priors for the experiment's call paths: by full call path, else by function name.

    Raises:
        InputError: the experiment has parameters the taint run did not mark -- the priors
            would exclude them from every model, so the profile cannot be used as is.
    """
    known = list(profile.parameters)
    unmarked = [p for p in experiment.parameters if p not in known]
    if unmarked:
        raise InputError(
            f"experiment parameters {unmarked} were not marked in the taint run (the profile "
            f"has {known}); mark them (perfcast taint --param NAME=argv:N or "
            "perfcast_register) and run perfcast taint again"
        )
    matcher = _Matcher(profile, experiment, inclusive=inclusive)
    for callpath in experiment.callpaths:
        matcher.match(callpath)
    return matcher.result


class _Matcher:
    """Pairs measured call paths with the profile's entries (:func:`match_profile`).

    Tried in turn: the exact call path, the call path with argument lists dropped
    (``main->sweep`` for ``main->sweep(double*, int)``), the function its last frame names,
    and for a function the static pre-pass pruned (no entry: constant per call), the visits
    its caller's loops give it. The profile's call paths are indexed as measurements spell
    them (:func:`~perfcast.taint.profile_model.measured_callpath`), so a frame that names two
    ``static`` functions of different files takes both entries, their costs added.
    """

    def __init__(self, profile: TaintProfile, experiment: Experiment, *, inclusive: bool):
        self.profile = profile
        self.inclusive = inclusive
        self.parameters = experiment.parameters
        self.by_path = priors_from_profile(profile, parameters=self.parameters, inclusive=inclusive)
        self.by_function = function_priors_from_profile(
            profile, parameters=self.parameters, inclusive=inclusive
        )
        self.result = TaintMatch(
            dropped_parameters=[p for p in profile.parameters if p not in self.parameters]
        )
        self.entries: dict[str, list[CallpathProfile]] = {}
        self.owners: dict[str, list[str]] = {}
        self.normalised: dict[str, list[str]] = {}
        self.children: dict[str, list[str]] = {}
        self.names: dict[str, list[str]] = {}
        for name, function in profile.functions.items():
            self.names.setdefault(without_arguments(name), []).append(name)
            for profile_path, entry in function.callpaths.items():
                callpath = measured_callpath(profile_path)
                if callpath not in self.entries:
                    self.normalised.setdefault(normalise_callpath(callpath), []).append(callpath)
                    frames = split_callpath(callpath)
                    if len(frames) > 1:
                        self.children.setdefault(join_callpath(frames[:-1]), []).append(callpath)
                self.entries.setdefault(callpath, []).append(entry)
                self.owners.setdefault(callpath, []).append(name)
        # library routines are measured by their wrappers, never inside the caller
        self.library_paths = {
            measured_callpath(c)
            for f in profile.functions.values()
            if f.is_library
            for c in f.callpaths
        }
        self.seen = {normalise_callpath(c) for c in experiment.callpaths}
        self.constant = {without_arguments(n) for n in [*profile.pruned, *profile.constant]}

    def match(self, callpath: str) -> None:
        candidates = (
            [callpath]
            if callpath in self.by_path
            else self.normalised.get(normalise_callpath(callpath), [])
        )
        if len(candidates) == 1:
            self.by_callpath(callpath, candidates[0])
        elif candidates:  # overloads print alike once argument lists are gone
            self.by_owners(callpath, sorted({o for c in candidates for o in self.owners[c]}))
        elif owners := self.names.get(without_arguments(split_callpath(callpath)[-1]), []):
            self.by_owners(callpath, owners)
        else:
            self.by_caller(callpath)

    def by_callpath(self, callpath: str, found: str) -> None:
        """The profile has the call path. An exclusive metric of it includes the callees the
        measurement does not show (inlined, or left out by an instrumentation filter)."""
        self.result.priors[callpath] = self.by_path[found]
        self.result.functions[callpath] = self.owners[found]
        hidden = self.hidden_children(found)
        if not self.inclusive and hidden:
            total = add(*(self.total(c, inclusive=False) for c in [found, *hidden]))
            self.result.priors[callpath] = prior_from_terms(total, self.parameters)
            self.result.absorbed[callpath] = [split_callpath(c)[-1] for c in hidden]

    def total(self, callpath: str, *, inclusive: bool) -> Dependency:
        """A measured call path's total over its visits: the sum of the profile's entries
        that print as it."""
        return add(*(entry.total(inclusive=inclusive) for entry in self.entries[callpath]))

    def hidden_children(self, path: str) -> list[str]:
        """Profile call paths below ``path`` whose cost a measurement of ``path`` includes."""
        found = []
        for child in self.children.get(path, []):
            if normalise_callpath(child) not in self.seen and child not in self.library_paths:
                found += [child, *self.hidden_children(child)]
        return found

    def by_owners(self, callpath: str, owners: list[str]) -> None:
        """The profile has the function, not the call path: the loosest restriction every
        candidate function allows."""
        if len(owners) == 1:
            self.result.priors[callpath] = self.by_function[owners[0]]
        else:
            total = add(
                *(self.profile.functions[o].total(inclusive=self.inclusive) for o in owners)
            )
            self.result.priors[callpath] = prior_from_terms(total, self.parameters)
        self.result.functions[callpath] = owners
        self.result.by_function.append(callpath)

    def by_caller(self, callpath: str) -> None:
        """A function the profile has no entry for: if proved constant, it runs as often as
        its caller's loops say (any of them: the call site is not known)."""
        frames = split_callpath(callpath)
        caller = self.caller_visits(frames)
        if without_arguments(frames[-1]) not in self.constant:
            self.result.unmatched.append(callpath)
        elif caller is not None:
            self.result.priors[callpath] = prior_from_terms(caller, self.parameters)
        elif len(frames) == 1:
            self.result.priors[callpath] = Prior.constant(SOURCE)
        else:
            self.result.unmatched.append(callpath)

    def caller_visits(self, frames: list[str]) -> Dependency | None:
        """The exclusive total of the call path's caller, if the profile has exactly one
        measured call path for it."""
        if len(frames) < 2:
            return None
        parent = join_callpath(frames[:-1])
        found = (
            [parent]
            if parent in self.entries
            else self.normalised.get(normalise_callpath(parent), [])
        )
        return self.total(found[0], inclusive=False) if len(found) == 1 else None


def branch_parameters(profile: TaintProfile, callpath: str) -> frozenset[str]:
    """Parameters that decide a branch on the way to ``callpath``'s code.

    A branch decided by ``p`` lets ``p`` reach the code even where no loop bound depends on
    it: ``if (has_neighbour_below) send(...)`` sends as often as the rank's position and
    ``p`` say. Counted: every branch of the call path's own function and of its caller
    (which decides how often a library routine such as ``MPI_Wait`` runs, often through a
    count set in branches, an implicit flow the taint labels of the call itself miss), and
    further up the branches that guard the call to the next frame.
    """
    by_name: dict[str, list[FunctionProfile]] = {}
    for name, function in profile.functions.items():
        by_name.setdefault(without_arguments(name), []).append(function)
    frames = [without_arguments(f) for f in split_callpath(callpath)]
    found: set[str] = set()
    for index, frame in enumerate(frames):
        callee = frames[index + 1] if index + 1 < len(frames) else None
        near = index >= len(frames) - 2  # the function itself or its caller
        for function in by_name.get(frame, []):
            for branch in function.branches:
                guarded = {without_arguments(c) for c in branch.calls}
                if near or callee in guarded:
                    found.update(branch.params)
    return frozenset(found)


def unreachable_parameters(
    profile: TaintProfile, match: TaintMatch, callpath: str, parameters: Iterable[str]
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
    free: ModelSet, match: TaintMatch, profile: TaintProfile | None = None
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
    profile: TaintProfile, experiment: Experiment, match: TaintMatch
) -> dict[str, list[str]]:
    """Paper C2: parameter-decided branches that may switch algorithms across the range.

    A branch is a possible switch on a parameter ``X`` when

    * it is not a guard that exits a loop (those bound trip counts, which the dependency
      already models),
    * its outcome was uniform in the taint run (always or never taken): the parameter's
      value, not the data visited in a loop, chose the path -- a branch with mixed outcomes
      splits work per iteration rather than switching algorithms, and
    * ``X`` takes more than one value in the experiment, so the measured range may
      straddle the branch's threshold, and
    * the rank's position does not take part in the condition (:attr:`Branch.position`):
      ``if (colLoc == tp - 1)`` in LULESH tells the boundary ranks of one run from the
      interior ones; every run has both, so it switches nothing between runs.

    Such a branch flags the call path of its own function (it selects code inside it), and
    every call path through a call it guards: ``if (n < 4) kernel_linear(n); else
    kernel_log(n);`` in ``foo`` flags ``foo``, ``foo->kernel_linear`` and everything below
    it. The taint run saw one parameter value, so this flags *possible* switches only.
    """
    varying = {p for p in experiment.parameters if experiment.data[p].nunique(dropna=True) > 1}
    switches = {
        name: _possible_switches(name, function, varying)
        for name, function in profile.functions.items()
    }
    by_name: dict[str, list[str]] = {}
    for name in profile.functions:
        by_name.setdefault(without_arguments(name), []).append(name)
    warnings: dict[str, list[str]] = {}

    def flag(callpath: str, texts: Iterable[str]) -> None:
        listed = warnings.setdefault(callpath, [])
        listed += [text for text in dict.fromkeys(texts) if text not in listed]

    for callpath, owners in match.functions.items():
        flag(
            callpath,
            (
                f"possible algorithm switch on {parameter}: the branch at {where} "
                f"is decided by {parameter}" + _selected_work(branch, parameter)
                for name in owners
                for branch, where, parameters in switches[name]
                for parameter in parameters
            ),
        )
    for callpath in experiment.callpaths:
        frames = [without_arguments(f) for f in split_callpath(callpath)]
        flag(
            callpath,
            (
                f"possible algorithm switch on {parameter}: the branch at {where} "
                f"in {caller}, decided by {parameter}, selects whether {callee} runs"
                + _selected_work(branch, parameter)
                for caller, callee in itertools.pairwise(frames)
                for name in by_name.get(caller, [])
                for branch, where, parameters in switches[name]
                if callee in {without_arguments(c) for c in branch.calls}
                for parameter in parameters
            ),
        )
    return {callpath: texts for callpath, texts in warnings.items() if texts}


def _selected_work(branch: Branch, parameter: str) -> str:
    """What a C2 warning adds for a branch that selects work (:attr:`Branch.selects_work`):
    the cost law itself may differ per side, which the prior allows but one PMNF cannot
    express."""
    if not branch.selects_work:
        return ""
    return (
        f"; it selects loops or calls of different cost, so the cost switches with "
        f"{parameter}: {switch_advice(parameter)}"
    )


def _possible_switches(
    name: str, function: FunctionProfile, varying: set[str]
) -> list[tuple[Branch, str, list[str]]]:
    """(branch, where, parameters) of the possible switches in one function
    (:func:`algorithm_switch_warnings`)."""
    found = []
    for branch in function.branches:
        parameters = [p for p in branch.params if p in varying]
        if parameters and branch.uniform and not branch.exits_loops_at and not branch.position:
            found.append((branch, f"{function.file or name}:{branch.line}", parameters))
    return found


CONTENTION, ALGORITHM_SWITCH = "contention", "algorithm-switch"
"""The kinds of the taint stage's findings (paper C1 and C2)."""


def flag_models(
    models: ModelSet,
    free: ModelSet | None,
    profile: TaintProfile,
    experiment: Experiment,
    match: TaintMatch,
) -> ModelSet:
    """``models`` with :func:`validity_findings`; flagging a set twice gives the same set."""
    return models.with_findings(validity_findings(models, free, profile, experiment, match))


def validity_findings(
    models: ModelSet,
    free: ModelSet | None,
    profile: TaintProfile,
    experiment: Experiment,
    match: TaintMatch,
) -> list[Finding]:
    """The C1 and C2 warnings on ``models`` as findings of stage ``"taint"``: contention
    judged on the black-box models ``free`` (``None``: on ``models`` themselves)."""
    contention = contention_warnings(free if free is not None else models, match, profile)
    switches = algorithm_switch_warnings(profile, experiment, match)
    findings = [
        Finding(SOURCE, callpath, metric, CONTENTION, text)
        for (callpath, metric), texts in contention.items()
        if (callpath, metric) in models
        for text in texts
    ]
    callpaths = {model.callpath for model in models}
    findings += [
        Finding(SOURCE, callpath, None, ALGORITHM_SWITCH, text)
        for callpath, texts in switches.items()
        if callpath in callpaths
        for text in texts
    ]
    return findings
