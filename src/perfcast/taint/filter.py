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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.outputs import OutputKind, write_output
from perfcast.taint.profile import FORMAT

HEADER = "# perfcast taint: functions whose cost can depend on a parameter\n"


def _check(profile: Mapping[str, Any]) -> None:
    if profile.get("format") != FORMAT:
        raise InputError(
            f"not a perfcast taint profile (format {profile.get('format')!r}, expected {FORMAT!r})"
        )


def _names(profile: Mapping[str, Any], key: str) -> list[str]:
    """The list of function names under ``key``; InputError naming the key if it is not one
    (the profile is a file, and ``perfcast build --filter`` compiles its names in)."""
    names = profile.get(key, [])
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise InputError(f"the taint profile's {key!r} must be a list of function names")
    return names


def relevant_functions(profile: Mapping[str, Any]) -> list[str]:
    """Functions of the program whose cost depends on a parameter in the taint run."""
    _check(profile)
    if "relevant" not in profile:
        raise InputError("the taint profile has no 'relevant' list of functions")
    return list(_names(profile, "relevant"))


def instrumented_functions(profile: Mapping[str, Any]) -> list[str]:
    """What to measure: the relevant functions and those the taint run never reached."""
    return sorted({*relevant_functions(profile), *_names(profile, "not_executed")})


FILTER_FILE = OutputKind(
    "a perfcast filter file", lambda head: head.startswith(HEADER.encode("utf-8"))
)
"""A filter file replaces only an earlier one (it starts with :data:`HEADER`)."""


def write_filter(profile: Mapping[str, Any], path: Path) -> None:
    """The filter file of ``perfcast build --filter``: one function name per line."""
    names = "".join(f"{name}\n" for name in instrumented_functions(profile))
    write_output(path, HEADER + names, FILTER_FILE)
