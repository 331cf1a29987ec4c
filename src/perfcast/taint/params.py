"""Parameters marked from the command line, so most programs need no source change.

A parameter is bound to where its value arrives in the program's ``argv``:

* ``size=argv:1``   -- the first argument after the program name;
* ``iters=flag:-i`` -- the value after ``-i`` (``-i 10``) or in ``-i=10``.

The runtime labels the bytes of that argument before ``main`` runs; the label follows the
value through ``atoi``/``strtol``/``strtod``/``sscanf`` into the program, and in C++ through
``std::string`` and string streams (``std::istringstream >> n``; how: the taint README). One
name may be bound in several places (``n=flag:--nx`` and ``n=flag:--ny``): every copy
carries it.
Parameters marked in the source with ``perfcast_register(&var, "name")`` need no binding.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from perfcast.errors import InputError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ArgvParameter:
    name: str
    kind: str  # "pos" or "flag"
    where: str  # position (as text) or flag spelling

    @classmethod
    def parse(cls, text: str) -> ArgvParameter:
        """Read ``name=argv:N`` or ``name=flag:-x``."""
        name, sep, binding = text.partition("=")
        kind, _, where = binding.partition(":")
        if not sep or not NAME.match(name):
            raise InputError(
                f"parameter binding {text!r}: expected NAME=argv:N or NAME=flag:-x, "
                "NAME a C identifier"
            )
        if kind == "argv" and where.isdigit() and int(where) > 0:
            return cls(name, "pos", where)
        if kind == "flag" and where.startswith("-") and not set(where) & {";", ":", " "}:
            return cls(name, "flag", where)
        raise InputError(
            f"parameter binding {text!r}: use argv:N with N >= 1 (position after the program "
            "name) or flag:-x (value after the flag -x)"
        )

    def describe(self) -> str:
        return f"argv:{self.where}" if self.kind == "pos" else f"flag:{self.where}"


def sources_of(parameters: Sequence[ArgvParameter]) -> dict[str, str]:
    """Where each parameter is read, by name: one name may be bound at several places
    (``n=flag:--nx`` and ``n=flag:--ny``), which the profile lists together
    (``"flag:--nx, flag:--ny"``)."""
    places: dict[str, list[str]] = {}
    for parameter in parameters:
        places.setdefault(parameter.name, []).append(parameter.describe())
    return {name: ", ".join(dict.fromkeys(where)) for name, where in places.items()}


def runtime_spec(parameters: list[ArgvParameter]) -> str:
    """The ``$PERFCAST_TAINT_ARGV`` value the runtime reads."""
    return ";".join(f"{p.name}:{p.kind}:{p.where}" for p in parameters)


def check_bindings(parameters: Sequence[ArgvParameter], run_command: str, program: str) -> None:
    """Refuse, before the rewrite and build that take minutes, a binding the run command
    cannot satisfy: a flag it does not contain, or a position beyond its last argument.
    The program would then run with its default value, which no label marks, and the
    parameter would seem to drive nothing. Positions are checked only where the command
    names ``program`` (the built program); under a wrapper script the runtime's own report
    after the run is what remains."""
    try:
        words = shlex.split(run_command)
    except ValueError:
        return  # the runner reports a command it cannot split
    name = PurePath(program).name
    starts = [i for i, word in enumerate(words) if PurePath(word).name == name]
    for parameter in parameters:
        if parameter.kind == "flag":
            flag = parameter.where
            if not any(word == flag or word.startswith(flag + "=") for word in words):
                raise InputError(
                    f"--param {parameter.name}={parameter.describe()}: the run command "
                    f"{run_command!r} has no {flag}, so the program would use its default "
                    f"value, which nothing labels: add '{flag} VALUE' to the run command, or "
                    f'mark the variable in the source (perfcast_register(&var, "{parameter.name}"))'
                )
        elif starts and starts[-1] + int(parameter.where) >= len(words):
            raise InputError(
                f"--param {parameter.name}={parameter.describe()}: the run command "
                f"{run_command!r} has {len(words) - starts[-1] - 1} argument(s) after "
                f"{words[starts[-1]]}, so there is no argument {parameter.where} to label: "
                "give the position of the value after the program name"
            )
