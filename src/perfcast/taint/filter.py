"""The instrumentation filter a taint profile gives (paper section A3).

Measure only what can scale: the functions whose inclusive dependency names a parameter.
Two properties make that list the right one for call-path profiles:

* **Callers come along.** A caller's inclusive dependency composes its callees' at the call
  site, so every function on the call path to a parameter-dependent function is itself
  parameter-dependent: the measured call paths keep their shape (``main->solve->kernel``),
  and only constant leaves and constant subtrees (getters, setters, small helpers) are
  dropped. Their time counts in their nearest measured caller.
* **Unseen code stays measured.** A function the taint run never reached (and the static
  pre-pass did not prove constant) may run at other points of the design -- the other arm
  of an algorithm switch -- so it is listed too; measuring a function that is never called
  costs nothing.

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
    """What to measure: the relevant functions and those the taint run never reached, by
    the symbol names instrumenters match (``helper``, not the profile's ``helper [a.c]``:
    a filter cannot tell two ``static`` functions of one name apart, so both are measured)."""
    return sorted(
        {symbol_name(name) for name in [*relevant_functions(profile), *profile.not_executed]}
    )


FILTER_FILE = OutputKind(
    "a perfcast filter file", lambda head: head.startswith(HEADER.encode("utf-8"))
)
"""A filter file replaces only an earlier one (it starts with :data:`HEADER`)."""


def write_filter(profile: TaintProfile, path: Path) -> None:
    """The filter file of ``perfcast build --filter``: one function name per line."""
    names = "".join(f"{name}\n" for name in instrumented_functions(profile))
    write_output(path, HEADER + names, FILTER_FILE)
