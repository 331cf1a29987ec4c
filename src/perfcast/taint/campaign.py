"""The campaign form of ``perfcast taint``: everything from ``perfcast.toml``.

``perfcast taint perfcast.toml`` needs no flags: the spec already says how to build the
program (``[build]``), how to run it (``[run] command`` with ``{name}`` placeholders) and
which parameters vary. From it we derive

* the **parameter bindings**: a placeholder that is a whole argument (``./app {size}``) is
  ``argv:N``; one written ``--size={size}`` is ``flag:--size``, each place a parameter is
  written bound to it; ``p`` is the rank count and
  is labelled by ``MPI_Comm_size`` (the library database), so it needs no binding;
* one **representative point** (:func:`taint_point`): the taint run only has to reach the
  code, not to be large, so every parameter takes its smallest value -- except ``p``, which
  takes the smallest value of at least :data:`MIN_TAINT_RANKS` so that communication code
  paths (neighbour exchanges, reductions) run;
* the **instrumented build**, written under the work directory rather than over the
  campaign's executable (a later ``perfcast measure --no-build`` must not run the
  DataFlowSanitizer binary), and the run command pointed at it;
* the **profile location** (:func:`default_profile_path`): beside the campaign store,
  ``<store stem>.taint.json``, where ``perfcast design`` and ``perfcast measure`` find it.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfcast.appspec import RANKS, TAINT_PROFILE_SUFFIX, AppSpec, beside, expand
from perfcast.errors import InputError
from perfcast.experiment.points import format_point
from perfcast.taint.driver import TaintOptions, taint_program
from perfcast.taint.params import ArgvParameter
from perfcast.taint.profile_model import TaintProfile, TaintRun

MIN_TAINT_RANKS = 2
"""Ranks of the taint run when the design offers that many: with one rank, neighbour
exchanges and reductions often take a shortcut, and their parameter dependence is missed."""

TAINT_TIMEOUT_FACTOR = 20.0
"""The taint run may take this many times ``[run] timeout``: DataFlowSanitizer slows
programs down 3-18x (toolchain facts)."""

TAINT_ENVIRONMENT = (
    "PERFCAST_TAINT_OUT",
    "PERFCAST_TAINT_PARAMS",
    "PERFCAST_TAINT_DISCOVER",
    "PERFCAST_TAINT_ARGV",
)
"""Variables the taint runtime reads; forwarded to every rank with ``mpirun -x``."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FLAG_VALUE = re.compile(r"^(-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*)=\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def default_profile_path(spec: AppSpec) -> Path:
    """Where the campaign's taint profile lives: ``<store stem>.taint.json`` beside the store."""
    return beside(spec.store, TAINT_PROFILE_SUFFIX)


@dataclass
class Bindings:
    """How the parameters of a run command reach the program.

    Attributes:
        parameters: command-line bindings for the taint runtime.
        notes: parameters perfcast cannot label from the command line, and why.
    """

    parameters: list[ArgvParameter] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def bindings_from_command(template: str, names: Sequence[str]) -> Bindings:
    """Bind every parameter placeholder of a ``[run] command`` template to its argument.

    The template's first word is the program; ``{p}`` there or elsewhere is left to
    ``MPI_Comm_size`` unless it is an argument of its own. A parameter written in several
    places (HPCG's ``--nx={n} --ny={n} --nz={n}``) is one parameter, bound at each of them:
    the program may read any of the copies, and every one carries its label.
    """
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise InputError(f"cannot split the run command {template!r}: {exc}") from None
    found = Bindings()
    inside: dict[str, str] = {}  # parameter -> the first word it arrives inside
    for position, word in enumerate(words):
        used = [n for n in _PLACEHOLDER.findall(word) if n in names]
        if not used:
            continue
        whole = _PLACEHOLDER.fullmatch(word)
        flag = _FLAG_VALUE.match(word)
        if position > 0 and whole is not None:
            binding = ArgvParameter(whole.group(1), "pos", str(position))
        elif position > 0 and flag is not None:
            binding = ArgvParameter(flag.group(2), "flag", flag.group(1))
        else:
            for name in used:
                inside.setdefault(name, word)
            continue
        if binding not in found.parameters:  # the same flag twice: the program reads one
            found.parameters.append(binding)
    bound = {binding.name for binding in found.parameters}
    found.notes = [
        f"parameter {name} arrives inside the argument {word!r}, which the taint runtime "
        f'cannot label; mark it in the source (perfcast_register(&var, "{name}")) or make '
        "it an argument of its own"
        for name, word in inside.items()
        if name != RANKS and name not in bound
    ]
    return found


def taint_point(spec: AppSpec, override: Mapping[str, float] | None = None) -> dict[str, float]:
    """The point of the design the taint run uses (see the module docstring).

    ``override`` sets parameters explicitly; its names and values are checked against the spec.
    """
    point: dict[str, float] = {}
    for parameter in spec.parameters:
        values = parameter.values
        if parameter.name == RANKS:
            large_enough = [v for v in values if v >= MIN_TAINT_RANKS]
            point[parameter.name] = large_enough[0] if large_enough else values[0]
        else:
            point[parameter.name] = values[0]
    for name, value in (override or {}).items():
        if name not in point:
            raise InputError(
                f"the taint point names {name!r}, which is not a parameter of the spec "
                f"({', '.join(point)})",
                path=spec.path,
            )
        if value <= 0:
            raise InputError(
                f"the taint point gives {format_point({name: value})}; values must be positive"
            )
        point[name] = value
    return point


@dataclass
class CampaignTaint:
    """What :func:`taint_campaign` did: the profile and how it was obtained."""

    profile: TaintProfile
    point: dict[str, float]
    compile_command: list[str]
    run_command: str
    bindings: Bindings


def compile_command_for(spec: AppSpec, given: Sequence[str] = ()) -> list[str]:
    """The one compile-and-link command the taint build rewrites.

    ``[build] sources`` gives it directly. A ``[build] command`` (``make ...``) cannot be
    rewritten file by file, so the user names the compile command after ``--``.
    """
    if given:
        return list(given)
    build = spec.build
    if build is None:
        raise InputError(
            "the spec has no [build] table: give the compile command after '--' "
            "(perfcast taint perfcast.toml -- mpicc app.c -o app)",
            path=spec.path,
        )
    if build.command is not None:
        raise InputError(
            f"[build] command = {build.command!r} is a build script; the taint analysis "
            "rewrites the sources of one compile-and-link command: give it after '--' "
            "(perfcast taint perfcast.toml -- mpicc -O2 a.c b.c -o app) or use "
            "[build] sources",
            path=spec.path,
        )
    assert build.output is not None
    return [build.compiler, *build.flags, *build.sources, "-o", build.output]


def _retarget(
    spec: AppSpec, compile_command: list[str], program: str, binary: Path
) -> tuple[list[str], str]:
    """Build into ``binary`` instead of the campaign's executable, and run that.

    Returns the compile command with its ``-o`` replaced and the program to run.
    """
    if "-o" not in compile_command[:-1]:
        raise InputError(
            f"the compile command {shlex.join(compile_command)!r} has no '-o OUTPUT'; "
            "name the executable the run command starts"
        )
    index = compile_command.index("-o") + 1
    output = (spec.directory / compile_command[index]).resolve()
    if (spec.directory / program).resolve() != output:
        raise InputError(
            f"the run command starts {program!r}, but the build writes "
            f"{compile_command[index]!r}; the taint run must start the program it builds",
            path=spec.path,
        )
    retargeted = [*compile_command[:index], str(binary), *compile_command[index + 1 :]]
    return retargeted, str(binary)


def run_command_for(spec: AppSpec, point: Mapping[str, float], program: str | None = None) -> str:
    """``mpirun -np P ... ./app ARGS`` for ``point``, as the local backend starts a run."""
    argv = shlex.split(expand(spec.run.command, point))
    if program is not None:
        argv[0] = program
    mpirun = ["mpirun"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")
    ranks = int(point.get(RANKS, 1))
    mpirun += ["--oversubscribe", "-np", str(ranks)]
    for variable in TAINT_ENVIRONMENT:
        mpirun += ["-x", variable]
    return shlex.join([*mpirun, *spec.run.mpirun_args, *argv])


def taint_campaign(
    spec: AppSpec,
    *,
    compile_command: Sequence[str] = (),
    point: Mapping[str, float] | None = None,
    options: TaintOptions | None = None,
) -> CampaignTaint:
    """Taint-analyse the program of a campaign at one representative point of its design."""
    options = replace(options or TaintOptions())
    chosen = taint_point(spec, point)
    names = [p.name for p in spec.parameters]
    bindings = bindings_from_command(spec.run.command, names)
    program = shlex.split(expand(spec.run.command, chosen))[0]
    if options.timeout is None:
        options.timeout = spec.run.timeout * TAINT_TIMEOUT_FACTOR
    with tempfile.TemporaryDirectory(prefix="perfcast-taint-bin-") as scratch:
        where = options.work_dir or Path(scratch)
        binary = (where / "bin" / Path(program).name).resolve()
        binary.parent.mkdir(parents=True, exist_ok=True)
        command, started = _retarget(
            spec, compile_command_for(spec, compile_command), program, binary
        )
        run = run_command_for(spec, chosen, started)
        profile = taint_program(
            command, run, bindings.parameters, cwd=spec.directory, options=options
        )
    profile = replace(
        profile,
        run=replace(
            profile.run or TaintRun(""),
            command=expand(spec.run.command, chosen),
            spec=str(spec.path),
            point={name: chosen[name] for name in names},
        ),
        warnings=(*profile.warnings, *bindings.notes),
    )
    return CampaignTaint(profile, chosen, command, run, bindings)
