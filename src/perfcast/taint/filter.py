"""The instrumentation filter a taint profile gives (paper section A3).

Measure only what can scale: the functions whose inclusive dependency names a parameter.
Two properties make that list the right one for call-path profiles:

* **Callers come along.** A caller's inclusive dependency composes its callees' at the call
  site, so every function on the call path to a parameter-dependent function is itself
  parameter-dependent: the measured call paths keep their shape (``main->solve->kernel``),
  and only constant leaves and constant subtrees (getters, setters, small helpers) are
  dropped. Their time counts in their nearest measured caller.
* **Unseen code only where a switch may run it.** A function the taint run never reached
  (and the static pre-pass did not prove constant) has no evidence that its cost depends on
  anything. It is listed only where an algorithm switch (:attr:`Branch.switches_work`) calls
  it in an arm the taint run did not take: other points of the design may run it, and then
  it is a kernel. Any other unseen function is left out: measuring it is not free, since a
  helper the taint point never called may be called millions of times at the others, and
  under ``--keep-inlined`` each call then pays the instrumentation (issue 25: an inline
  helper of HPCG's setup, 5.7 million calls per rank, turned a 0.2 s setup into 9 s). Its
  time counts in its nearest measured caller.

Library routines (MPI) are not listed: the PMPI wrappers measure them regardless.
"""

from __future__ import annotations

from pathlib import Path

from perfcast.errors import InputError
from perfcast.outputs import OutputKind, write_output
from perfcast.taint.profile_model import TaintProfile, symbol_name

HEADER = "# perfcast taint: functions whose cost can depend on a parameter\n"


def relevant_functions(profile: TaintProfile) -> list[str]:
    """Functions of the program whose cost depends on a parameter in the taint run."""
    if profile.relevant is None:
        raise InputError("the taint profile has no 'relevant' list of functions")
    return list(profile.relevant)


def instrumented_functions(profile: TaintProfile) -> list[str]:
    """What to measure: the relevant functions and the unseen arms of algorithm switches
    (module docstring), by the symbol names instrumenters match (``helper``, not the
    profile's ``helper [a.c]``: a filter cannot tell two ``static`` functions of one name
    apart, so both are measured)."""
    arms = switch_arms(profile)
    unseen = [name for name in profile.not_executed if symbol_name(name) in arms]
    return sorted({symbol_name(name) for name in [*relevant_functions(profile), *unseen]})


def switch_arms(profile: TaintProfile) -> set[str]:
    """Symbol names of the functions an algorithm switch calls in its arms."""
    return {
        symbol_name(name)
        for function in profile.functions.values()
        for branch in function.branches
        if branch.switches_work
        for name in branch.calls
    }


FILTER_FILE = OutputKind(
    "a perfcast filter file", lambda head: head.startswith(HEADER.encode("utf-8"))
)
"""A filter file replaces only an earlier one (it starts with :data:`HEADER`)."""


def write_filter(profile: TaintProfile, path: Path) -> None:
    """The filter file of ``perfcast build --filter``: one function name per line."""
    names = "".join(f"{name}\n" for name in instrumented_functions(profile))
    write_output(path, HEADER + names, FILTER_FILE)
