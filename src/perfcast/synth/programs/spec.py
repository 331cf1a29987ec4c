"""What a generated benchmark program is made of: loop nests, messages, kernels, the program.

The specification is exact: every iteration count and message size the C++ program computes
at run time is reproduced here bit for bit (same IEEE double arithmetic through the same libm
``pow`` and ``log2``, multiplied in the same order, the same rounding), so the ground truth
can be evaluated both as a PMNF model and as the exact integers the program executes.

Rounding rule (C++ and Python alike), applied once per term::

    count = max(1, llround(scale * prod_f x_f^i_f * log2(x_f)^j_f))

A term's count is rounded as a whole, never factor by factor: a product of separately
rounded trip counts drifts from the term by several percent where a factor is small (an
outer ``p`` loop of ~32 trips, an inner loop of a few), enough to swap neighbouring
exponents on a narrow measurement range. ``llround`` rounds halves away from zero;
``max(1, .)`` keeps every loop and message alive where the term vanishes (``log2(1) = 0``:
measure at ``p >= 2`` when a factor has ``log2(p)``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from perfcast.effort.laws import OPERATION_LAWS, Law
from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor, Model, Term

COMMUNICATION_OPERATIONS: tuple[str, ...] = (
    "allgather",
    "allreduce",
    "barrier",
    "bcast",
    "gather",
    "reduce",
    "scatter",
    "send",
    "recv",
    "sendrecv",
)
"""The MPI operations a communication kernel can call: the paper's nine (send and receive
as separate kernels) plus the combined ``sendrecv`` of halo exchanges."""

MPI_FUNCTIONS: dict[str, str] = {op: "MPI_" + op.capitalize() for op in COMMUNICATION_OPERATIONS}
"""Operation name to the MPI routine the kernel calls (``allreduce`` -> ``MPI_Allreduce``)."""

ELEMENT_BYTES = 8
"""Messages are arrays of ``MPI_DOUBLE``."""

RANK_SCALED_OPERATIONS = frozenset({"allgather", "allreduce"})
"""Operations whose rank-mean bytes sent are ``p * |message|`` under the runtime's byte
rules (every rank sends to every other); for the others the mean is ``|message|`` (a
Bcast/Scatter root sends ``p * |message|``, the other ranks nothing)."""

RECEIVE_ONLY_OPERATIONS = frozenset({"recv"})
"""Operations that send nothing: their byte truth is the bytes *received* (as
:class:`~perfcast.effort.EffortModeler` models them)."""

ITERATIONS = "iterations"
"""Metric name of the computational truth: innermost loop iterations per call and rank."""
ELEMENTS = "elements"
"""Metric name of the message truth: doubles per message and rank."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Work(StrEnum):
    """The array operation in the innermost loop body (one basic block per iteration)."""

    AXPY = "axpy"
    """``data[k] = 0.5 * data[k] + operand[k]``"""
    DOT = "dot"
    """``sum += data[k] * operand[k]``"""
    MULTIPLY = "multiply"
    """``data[k] = data[k] * operand[k] + 0.25``"""


def rounded_count(value: float) -> int:
    """``max(1, llround(value))`` exactly as C's ``llround`` (halves away from zero)."""
    floor = math.floor(value)
    count = floor + 1 if value - floor >= 0.5 else floor
    return max(1, int(count))


def factor_value(factor: Factor, x: float) -> float:
    """``x^i * log2(x)^j`` with the C program's operations and order."""
    return math.pow(x, float(factor.exponent)) * math.pow(math.log2(x), factor.log_exponent)


def term_count(scale: float, factors: Sequence[Factor], point: Mapping[str, float]) -> int:
    """``max(1, llround(scale * prod_f x_f^i_f * log2(x_f)^j_f))``, multiplied left to right
    as the C program does."""
    value = scale
    for factor in factors:
        value = value * factor_value(factor, float(point[factor.parameter]))
    return rounded_count(value)


@dataclass(frozen=True)
class LoopNest:
    """One PMNF term ``coefficient * prod_f x_f^i_f * log2(x_f)^j_f`` run as loops.

    The term's whole iteration count ``T`` (:meth:`iterations`) is rounded once. A term of
    one factor is one loop of ``T`` trips. A term of several factors is two nested loops:
    the outer one runs over the first factor, ``O`` times (:meth:`outer_iterations`), and
    the inner one shares the ``T`` iterations out over the outer ones (:meth:`inner_trips`:
    ``T // O`` each, one more for the first ``T % O``), so the innermost body runs exactly
    ``T`` times however ``O`` is rounded. ``O = min(T, max(1, llround(outer_scale * g)))``
    with ``g`` the first factor's value: never above ``T``, so no inner loop is empty.
    """

    coefficient: float
    factors: tuple[Factor, ...]
    outer_scale: float | None = None

    def __post_init__(self) -> None:
        if not self.factors:
            raise InputError("a loop nest needs at least one factor")
        if not self.coefficient > 0:
            raise InputError(f"a loop nest's coefficient must be positive, got {self.coefficient}")
        nested = len(self.factors) > 1
        if nested != (self.outer_scale is not None):
            raise InputError(
                "a loop nest of several factors needs an outer_scale (and one factor none), "
                f"got {len(self.factors)} factor(s) and outer_scale {self.outer_scale}"
            )
        if self.outer_scale is not None and not self.outer_scale > 0:
            raise InputError(f"outer_scale must be positive, got {self.outer_scale}")

    @property
    def nested(self) -> bool:
        return len(self.factors) > 1

    def iterations(self, point: Mapping[str, float]) -> int:
        """``T``: the innermost iterations, ``max(1, llround(term))``."""
        return term_count(self.coefficient, self.factors, point)

    def outer_iterations(self, point: Mapping[str, float]) -> int:
        """``O``: iterations of the outer loop (0 for a single loop), what the loop
        overhead of the nest grows with."""
        if self.outer_scale is None:
            return 0
        outer = term_count(self.outer_scale, self.factors[:1], point)
        return min(self.iterations(point), outer)

    def inner_trips(self, point: Mapping[str, float]) -> list[int]:
        """Trips of the inner loop in each outer iteration (of the single loop: ``[T]``)."""
        total = self.iterations(point)
        if self.outer_scale is None:
            return [total]
        outer = self.outer_iterations(point)
        base, longer = divmod(total, outer)
        return [base + 1] * longer + [base] * (outer - longer)

    @property
    def term(self) -> Term:
        return Term(self.coefficient, self.factors)

    def to_json(self) -> dict:
        return {**self.term.to_json(), "outer_scale": self.outer_scale}

    @classmethod
    def from_json(cls, data: Mapping) -> LoopNest:
        term = Term.from_json(data)
        outer = data.get("outer_scale")
        return cls(term.coefficient, term.factors, None if outer is None else float(outer))


@dataclass(frozen=True)
class Message:
    """A message of ``max(1, llround(scale * prod x^i * log2(x)^j))`` doubles per rank."""

    scale: float
    factors: tuple[Factor, ...]

    def elements(self, point: Mapping[str, float]) -> int:
        return term_count(self.scale, self.factors, point)

    @property
    def term(self) -> Term:
        return Term(self.scale, self.factors)


@dataclass(frozen=True)
class KernelSpec:
    """One kernel: a non-inlined C function called once per repetition from ``main``.

    A *computation* kernel runs ``nests`` one after the other (PMNF terms added by
    sequence). A *communication* kernel calls one MPI ``operation`` sized by ``message``
    (``barrier`` has none) and may run ``nests`` after it, on the arrays, like the paper's
    "computation phases following the communication".
    """

    function: str
    nests: tuple[LoopNest, ...] = ()
    operation: str | None = None
    message: Message | None = None
    work: Work = Work.AXPY

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.function):
            raise InputError(f"kernel name {self.function!r} is not a C identifier")
        if self.operation is None:
            if not self.nests:
                raise InputError(f"computation kernel {self.function} needs at least one loop")
            if self.message is not None:
                raise InputError(f"{self.function}: a message needs a communication operation")
            return
        if self.operation not in COMMUNICATION_OPERATIONS:
            raise InputError(
                f"unknown MPI operation {self.operation!r}; known: "
                + ", ".join(COMMUNICATION_OPERATIONS)
            )
        if self.operation == "barrier" and self.message is not None:
            raise InputError(f"{self.function}: a barrier moves no message")
        if self.operation != "barrier" and self.message is None:
            raise InputError(f"{self.function}: MPI_{self.operation.capitalize()} needs a message")

    @property
    def kind(self) -> str:
        return "computation" if self.operation is None else "communication"

    @property
    def mpi_function(self) -> str | None:
        return None if self.operation is None else MPI_FUNCTIONS[self.operation]

    @property
    def law(self) -> Law | None:
        return None if self.operation is None else OPERATION_LAWS[self.operation]

    @property
    def parameters(self) -> set[str]:
        used = {factor.parameter for nest in self.nests for factor in nest.factors}
        return used | {f.parameter for f in (self.message.factors if self.message else ())}

    def iterations(self, point: Mapping[str, float]) -> int:
        """Innermost iterations of one call at ``point``: exactly what the program runs."""
        return sum(nest.iterations(point) for nest in self.nests)

    def outer_iterations(self, point: Mapping[str, float]) -> int:
        """Iterations of all nests' enclosing loops (:meth:`LoopNest.outer_iterations`)."""
        return sum(nest.outer_iterations(point) for nest in self.nests)

    def effort(self, callpath: str) -> Model | None:
        """Innermost iterations per call and rank as a PMNF model (``None`` without loops)."""
        if not self.nests:
            return None
        return Model(callpath, ITERATIONS, 0.0, tuple(nest.term for nest in self.nests))


@dataclass(frozen=True)
class ProgramSpec:
    """A benchmark program: its kernels, called in order, ``repeat`` times, from ``main``.

    ``parameters`` names the two execution parameters: the first is the number of MPI
    ranks (``MPI_Comm_size``), the second the problem size ``n`` (``argv[1]``).
    ``reference`` is the point, (ranks, size), the generated coefficients were sized for
    (the largest point one intends to measure); it is recorded, not used by the program.
    """

    name: str
    kernels: tuple[KernelSpec, ...]
    parameters: tuple[str, str] = ("p", "n")
    reference: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.name):
            raise InputError(
                f"program name {self.name!r} must be a C identifier (letters, digits, _)"
            )
        check_parameters(self.parameters)
        if not self.kernels:
            raise InputError(f"program {self.name} has no kernels")
        functions = [k.function for k in self.kernels]
        duplicates = sorted({f for f in functions if functions.count(f) > 1})
        if duplicates:
            raise InputError(f"kernel names must be unique; repeated: {', '.join(duplicates)}")
        for kernel in self.kernels:
            unknown = kernel.parameters - set(self.parameters)
            if unknown:
                raise InputError(
                    f"{kernel.function} uses {sorted(unknown)}, not parameters of the program "
                    f"({', '.join(self.parameters)})"
                )

    @property
    def ranks(self) -> str:
        return self.parameters[0]

    @property
    def size(self) -> str:
        return self.parameters[1]

    def point(self, ranks: float, size: float) -> dict[str, float]:
        return {self.ranks: float(ranks), self.size: float(size)}


def check_parameters(parameters: Sequence[str]) -> None:
    """Two distinct identifiers: (ranks, size)."""
    if len(parameters) != 2 or len(set(parameters)) != 2:
        raise InputError(
            f"a program has two distinct parameters (ranks, size), got {tuple(parameters)}"
        )
    for name in parameters:
        if not _IDENTIFIER.match(name) or name == "log2":
            raise InputError(f"parameter name {name!r} must be an identifier other than log2")


def check_exponent(factor: Factor, where: str) -> Factor:
    """Loops and messages grow with their parameter: no negative exponents."""
    if factor.exponent < 0 or factor.log_exponent < 0:
        raise InputError(
            f"{where}: negative exponents are not supported ({factor.text()}); a loop's trip "
            "count and a message size grow with the parameter"
        )
    if factor.exponent == Fraction(0) and factor.log_exponent == 0:
        raise InputError(f"{where}: a factor {factor.parameter}^0 is a constant")
    return factor
