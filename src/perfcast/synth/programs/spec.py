"""What a generated benchmark program is made of: loops, messages, kernels, the program.

The specification is exact: every trip count and message size the C++ program computes at
run time is reproduced here bit for bit (same IEEE double arithmetic through the same libm
``pow`` and ``log2``, the same rounding), so the ground truth can be evaluated both as a
PMNF model and as the exact integers the program executes.

Rounding rule (C++ and Python alike)::

    count = max(1, llround(scale * x^i * log2(x)^j))      # one loop over one parameter x
    count = max(1, llround(scale * prod_f x_f^i_f * log2(x_f)^j_f))   # one message

``llround`` rounds halves away from zero; ``max(1, .)`` keeps every loop and message
alive where the factor vanishes (``log2(1) = 0``: measure at ``p >= 2`` when a factor has
``log2(p)``).
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

BYTES_SENT = "mpi_bytes_sent"
BYTES_RECEIVED = "mpi_bytes_received"
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


@dataclass(frozen=True)
class Loop:
    """One ``for`` loop: ``max(1, llround(scale * x^i * log2(x)^j))`` iterations."""

    factor: Factor
    scale: float

    def trips(self, point: Mapping[str, float]) -> int:
        return rounded_count(
            self.scale * factor_value(self.factor, float(point[self.factor.parameter]))
        )

    def to_json(self) -> dict:
        return {**self.factor.to_json(), "scale": self.scale}

    @classmethod
    def from_json(cls, data: Mapping) -> Loop:
        return cls(Factor.from_json(data), float(data["scale"]))


@dataclass(frozen=True)
class LoopNest:
    """Loops nested in the order given (outermost first): one PMNF term, its factors
    multiplied by nesting. Its iterations are the product of the loops' trip counts."""

    loops: tuple[Loop, ...]

    def iterations(self, point: Mapping[str, float]) -> int:
        return math.prod(loop.trips(point) for loop in self.loops)

    def outer_iterations(self, point: Mapping[str, float]) -> int:
        """Iterations of the loops around the innermost one (0 for a single loop): what
        the loop overhead of a nest grows with."""
        if len(self.loops) == 1:
            return 0
        return math.prod(loop.trips(point) for loop in self.loops[:-1])

    @property
    def term(self) -> Term:
        """The nest as a PMNF term: coefficient = product of the loops' scales."""
        return Term(
            math.prod(loop.scale for loop in self.loops), tuple(loop.factor for loop in self.loops)
        )


@dataclass(frozen=True)
class Message:
    """A message of ``max(1, llround(scale * prod x^i * log2(x)^j))`` doubles per rank."""

    scale: float
    factors: tuple[Factor, ...]

    def elements(self, point: Mapping[str, float]) -> int:
        value = self.scale
        for factor in self.factors:
            value = value * factor_value(factor, float(point[factor.parameter]))
        return rounded_count(value)

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
        used = {loop.factor.parameter for nest in self.nests for loop in nest.loops}
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
