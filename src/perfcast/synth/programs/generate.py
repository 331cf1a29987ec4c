"""Kernels and programs, random (``noise-resilient-priors.txt`` IV) or specified as text.

Complexities are drawn from the PMNF building blocks ``F = {x^i, log2(x)^j}`` (Eq. 3) with
``i`` in I and ``j`` in J (Eq. 2), for ``x`` the ranks ``p`` and the size ``n``. Terms
combine by sequence (a sum: one loop nest after the other) and by nesting (a product: the
ranks loop outside, the size loop inside).

Sizing. Coefficients are not drawn blindly (``n^3`` next to ``p^(1/4)`` would leave the
small term invisible and the run either instant or endless). Instead each kernel gets an
*iteration budget* at the reference point — the largest point one intends to measure,
:data:`DEFAULT_REFERENCE` — log-uniform in ``iterations``; its terms share the budget by
log-uniform weights in ``term_weights``, and each term's coefficient follows as
``share / basis(reference)``. So that the counted effort follows the truth closely also
at the *smallest* point one intends to measure (:data:`DEFAULT_SMALLEST`), where a steep
term has shrunk by up to four orders of magnitude, the coefficients are then raised
together until the kernel runs :data:`MIN_ITERATIONS` there (rounding and loop overhead
are then a few hundredths of a percent of the count), but not beyond
:data:`MAX_ITERATIONS` per term at the reference; a product term's outer loop is sized by
:data:`MIN_INNER_TRIPS`. Messages get ``message_elements`` doubles per rank at the
reference. Measured here in a counter build: ~2-3 ns per innermost iteration on one core,
about three times that with 6 ranks on 2 cores; a typical kernel (~10^6 iterations at the
reference) costs a few ms per call, the steepest (raised to 10^8) about a second.

Scaling style: weak scaling, as in the paper's evaluation. ``n`` is the problem size per
rank; terms in ``p`` have non-negative exponents (work or messages that grow with the
machine: trees, all-to-all exchanges, replicated data). A strong-scaling ``n/p`` would need
negative exponents, outside the PMNF sets the modelers search, so it is not generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor, Term
from perfcast.modeling.space import DEFAULT_EXPONENTS, DEFAULT_LOG_EXPONENTS
from perfcast.synth.programs.expressions import (
    ParsedTerm,
    parse_communication,
    parse_computation,
)
from perfcast.synth.programs.spec import (
    COMMUNICATION_OPERATIONS,
    RANK_SCALED_OPERATIONS,
    KernelSpec,
    LoopNest,
    Message,
    ProgramSpec,
    Work,
    check_exponent,
    check_parameters,
)

DEFAULT_RANKS: tuple[int, ...] = (2, 3, 4, 5, 6)
"""Rank counts that run here (2 cores, oversubscribed) and make a 5-point line for ``p``."""
DEFAULT_SIZES: tuple[int, ...] = (1000, 2000, 3000, 4000, 5000)
"""Problem sizes ``n`` of a 5-point line; only their ratios matter for the run time (the
coefficients are sized at the largest)."""
DEFAULT_REFERENCE: tuple[float, float] = (float(max(DEFAULT_RANKS)), float(max(DEFAULT_SIZES)))
"""(ranks, size) where the budgets below hold: the largest default measurement point."""

DEFAULT_SMALLEST: tuple[float, float] = (float(min(DEFAULT_RANKS)), float(min(DEFAULT_SIZES)))
"""(ranks, size) where the floors below hold: the smallest default measurement point."""

MIN_ITERATIONS = 10_000.0
"""Fewest innermost iterations of a kernel's loops at the smallest point: rounding a term's
count to an integer (half an iteration) and an outer loop that runs once (two blocks) are
then at most 0.025 % of the count per term. A budget drawn at the reference that leaves
fewer (a steep term shrinks up to 34000-fold from (6, 5000) to (2, 1000)) is raised."""
MAX_ITERATIONS = 1e8
"""Most innermost iterations per call and term at the reference that raising a budget to
:data:`MIN_ITERATIONS` may lead to (about a second per call with 6 ranks on 2 cores in a
counter build). It binds only for the steepest terms (``p^3 log2(p)^2 n^3 log2(n)^2``
shrinks 34000-fold over the default grid), whose floor then drops to ~3000 iterations."""
MIN_INNER_TRIPS = 16_384.0
"""Average trips of an inner loop per outer iteration at the smallest size: the outer loop
of a product term adds two basic blocks per outer iteration, so its runs are kept to
about ``T / MIN_INNER_TRIPS`` (that overhead stays near 0.01 % of the term, below what the
count modeler fits as a term of its own; with 4096 it fitted extra ``g(p)`` terms for
~15 % of random kernels)."""


@dataclass(frozen=True)
class ProgramGenerator:
    """Draws and builds kernels; every random choice comes from the ``rng`` passed in.

    Attributes:
        parameters: (ranks, size) names.
        reference: (ranks, size) where budgets hold, see the module docstring.
        smallest: (ranks, size), the smallest point one intends to measure, where the
            floors ``min_iterations`` and ``min_inner_trips`` hold; ``None``:
            :data:`DEFAULT_SMALLEST`, capped at the reference.
        iterations: range of a kernel's innermost iterations per call at the reference.
        min_iterations: see :data:`MIN_ITERATIONS`.
        max_iterations: see :data:`MAX_ITERATIONS`.
        min_inner_trips: see :data:`MIN_INNER_TRIPS`.
        message_elements: range of a message's doubles per rank at the reference.
        term_weights: range of the weights by which a kernel's terms share its budget.
        exponents, log_exponents: the sets I and J the factors are drawn from.
        max_terms: most terms (loop nests in sequence) of a random kernel.
        communication_share: chance that a random kernel is a communication kernel.
        computation_after_communication: chance that a random communication kernel also
            runs loops after its MPI call.
    """

    parameters: tuple[str, str] = ("p", "n")
    reference: tuple[float, float] = DEFAULT_REFERENCE
    smallest: tuple[float, float] | None = None
    iterations: tuple[float, float] = (2e5, 2e6)
    min_iterations: float = MIN_ITERATIONS
    max_iterations: float = MAX_ITERATIONS
    min_inner_trips: float = MIN_INNER_TRIPS
    message_elements: tuple[float, float] = (2.0**10, 2.0**15)
    term_weights: tuple[float, float] = (1.0, 10.0)
    exponents: tuple[Fraction, ...] = DEFAULT_EXPONENTS
    log_exponents: tuple[int, ...] = DEFAULT_LOG_EXPONENTS
    max_terms: int = 2
    communication_share: float = 0.4
    computation_after_communication: float = 0.3
    _shapes: tuple[tuple[Fraction, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("iterations", "message_elements", "term_weights"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise InputError(f"{name} must satisfy 1 <= low <= high, got ({low}, {high})")
        for name in ("communication_share", "computation_after_communication"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.max_terms < 1:
            raise InputError(f"max_terms must be >= 1, got {self.max_terms}")
        ranks, size = self.reference
        if not (ranks > 1 and size > 1):
            raise InputError(f"reference values must exceed 1 (log2 > 0), got {self.reference}")
        if self.smallest is None:
            smallest = (min(DEFAULT_SMALLEST[0], ranks), min(DEFAULT_SMALLEST[1], size))
            object.__setattr__(self, "smallest", smallest)
        else:
            low_ranks, low_size = self.smallest
            if not (1 < low_ranks <= ranks and 1 < low_size <= size):
                raise InputError(
                    f"smallest values must exceed 1 and not exceed the reference {self.reference}, "
                    f"got {self.smallest}"
                )
        for name in ("min_iterations", "min_inner_trips"):
            if not getattr(self, name) >= 1:
                raise InputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.max_iterations >= self.iterations[1]:
            raise InputError(
                f"max_iterations ({self.max_iterations:g}) must be at least the largest budget "
                f"({self.iterations[1]:g})"
            )
        shapes = tuple(
            (Fraction(i), int(j))
            for i in self.exponents
            for j in self.log_exponents
            if (Fraction(i), int(j)) != (Fraction(0), 0)
        )
        if not shapes or any(i < 0 or j < 0 for i, j in shapes):
            raise InputError("exponents and log exponents must be non-negative, not all zero")
        object.__setattr__(self, "_shapes", shapes)
        check_parameters(self.parameters)

    @property
    def reference_point(self) -> dict[str, float]:
        return dict(zip(self.parameters, self.reference, strict=True))

    @property
    def smallest_point(self) -> dict[str, float]:
        assert self.smallest is not None  # resolved in __post_init__
        return dict(zip(self.parameters, self.smallest, strict=True))

    # -- specified kernels ----------------------------------------------------------------

    def computation(
        self, function: str, effort: str, rng: np.random.Generator, *, work: Work | None = None
    ) -> KernelSpec:
        """A computation kernel with the complexity ``effort``, e.g. ``"n^2 + p*log2(n)"``."""
        terms = parse_computation(effort, self.parameters)
        return KernelSpec(function, self._nests(terms, rng), work=work or self._work(rng))

    def communication(
        self,
        function: str,
        communication: str,
        rng: np.random.Generator,
        *,
        effort: str | None = None,
        work: Work | None = None,
    ) -> KernelSpec:
        """A communication kernel, e.g. ``"allreduce:n*p"`` or ``"barrier"``, optionally
        followed by loops of complexity ``effort``."""
        parsed = parse_communication(communication, self.parameters)
        message = None if parsed.term is None else self._message(parsed.term, rng)
        nests = (
            () if effort is None else self._nests(parse_computation(effort, self.parameters), rng)
        )
        return KernelSpec(function, nests, parsed.operation, message, work or self._work(rng))

    # -- random kernels -------------------------------------------------------------------

    def random_kernel(self, index: int, rng: np.random.Generator) -> KernelSpec:
        """Kernel number ``index`` (its name ``kernel_<index>_<what>``), drawn at random."""
        if rng.random() < self.communication_share:
            operation = COMMUNICATION_OPERATIONS[rng.integers(len(COMMUNICATION_OPERATIONS))]
            message = None
            if operation != "barrier":
                factors = self._random_factors(
                    rng, exclude_rank_exponent=operation in RANK_SCALED_OPERATIONS
                )
                message = self._message(ParsedTerm(None, factors), rng)
            nests: tuple[LoopNest, ...] = ()
            if rng.random() < self.computation_after_communication:
                nests = self._nests(self._random_terms(rng), rng)
            return KernelSpec(
                kernel_name(index, operation), nests, operation, message, self._work(rng)
            )
        terms = self._random_terms(rng)
        return KernelSpec(kernel_name(index), self._nests(terms, rng), work=self._work(rng))

    def random_program(self, name: str, kernels: int, rng: np.random.Generator) -> ProgramSpec:
        if kernels < 1:
            raise InputError(f"a program needs at least one kernel, got {kernels}")
        specs = tuple(self.random_kernel(index, rng) for index in range(1, kernels + 1))
        return ProgramSpec(name, specs, self.parameters, self.reference)

    def _random_terms(self, rng: np.random.Generator) -> tuple[ParsedTerm, ...]:
        count = int(rng.integers(1, self.max_terms + 1))
        terms: list[ParsedTerm] = []
        while len(terms) < count:
            term = ParsedTerm(None, self._random_factors(rng))
            if term not in terms:
                terms.append(term)
        return tuple(terms)

    def _random_factors(
        self, rng: np.random.Generator, *, exclude_rank_exponent: bool = False
    ) -> tuple[Factor, ...]:
        """One factor per parameter of a random non-empty subset (nested if both).

        ``exclude_rank_exponent``: for operations whose byte count gains a factor ``p``,
        keep the ranks exponent such that ``i + 1`` is still in I, so the byte truth
        stays inside the modelers' search space."""
        while True:
            chosen = [p for p in self.parameters if rng.random() < 0.5]
            if chosen:
                break
        factors = []
        for parameter in chosen:
            shapes = self._shapes
            if exclude_rank_exponent and parameter == self.parameters[0]:
                allowed = set(self.exponents)
                shapes = tuple(s for s in shapes if s[0] + 1 in allowed)
            exponent, log_exponent = shapes[rng.integers(len(shapes))]
            factors.append(Factor(parameter, exponent, log_exponent))
        return tuple(factors)

    # -- sizing ---------------------------------------------------------------------------

    def _nests(self, terms: Sequence[ParsedTerm], rng: np.random.Generator) -> tuple[LoopNest, ...]:
        """Loop nests for ``terms``; coefficients not given share a drawn budget at the
        reference and are raised together where they run fewer than ``min_iterations`` at
        the smallest point (no further than ``max_iterations`` per term at the reference)."""
        budget = _log_uniform(rng, self.iterations)
        weights = [_log_uniform(rng, self.term_weights) for _ in terms]
        reference, smallest = self.reference_point, self.smallest_point
        for term in terms:
            if term.coefficient is not None:
                _check_count(term.coefficient, term.factors, reference)
        coefficients = [
            term.coefficient or budget * weight / sum(weights) / _basis(term.factors, reference)
            for term, weight in zip(terms, weights, strict=True)
        ]
        drawn = [term.coefficient is None for term in terms]
        sized = [(c, t.factors) for c, t, d in zip(coefficients, terms, drawn, strict=True) if d]
        raise_by = 1.0
        if sized:
            at_smallest = sum(c * _basis(factors, smallest) for c, factors in sized)
            at_reference = sum(c * _basis(factors, reference) for c, factors in sized)
            ceiling = self.max_iterations * len(sized)
            raise_by = max(1.0, min(self.min_iterations / at_smallest, ceiling / at_reference))
        return tuple(
            self._nest(term.factors, c * raise_by if d else c)
            for c, term, d in zip(coefficients, terms, drawn, strict=True)
        )

    def _nest(self, factors: Sequence[Factor], coefficient: float) -> LoopNest:
        """One term's nest, the ranks loop outermost. A product term's outer loop runs
        ``s * g(p)`` times with ``s = c * h(smallest size) / min_inner_trips``: about
        ``T / min_inner_trips`` at the smallest size, where ``T`` is smallest relative to
        ``g(p)``, so an inner loop runs at least about ``min_inner_trips`` times wherever
        ``n`` is at least the smallest size, and the outer loop's two blocks per iteration
        stay a negligible share of the count."""
        ordered = tuple(sorted(factors, key=lambda f: self.parameters.index(f.parameter)))
        for factor in ordered:
            check_exponent(factor, "loop")
        if len(ordered) == 1:
            return LoopNest(coefficient, ordered)
        inner_at_smallest = coefficient * _basis(ordered[1:], self.smallest_point)
        return LoopNest(coefficient, ordered, inner_at_smallest / self.min_inner_trips)

    def _message(self, term: ParsedTerm, rng: np.random.Generator) -> Message:
        factors = tuple(check_exponent(f, "message") for f in term.factors)
        if term.coefficient is not None:
            _check_count(term.coefficient, factors, self.reference_point)
            return Message(term.coefficient, factors)
        elements = _log_uniform(rng, self.message_elements)
        return Message(elements / _basis(factors, self.reference_point), factors)

    def _work(self, rng: np.random.Generator) -> Work:
        return list(Work)[rng.integers(len(Work))]


def kernel_name(index: int, operation: str | None = None) -> str:
    """``kernel_03_allreduce``, ``kernel_01_compute``: sorted by call order, self-describing."""
    return f"kernel_{index:02d}_{operation or 'compute'}"


def random_program(
    rng: np.random.Generator,
    name: str = "bench",
    *,
    kernels: int = 5,
    parameters: tuple[str, str] = ("p", "n"),
    communication_share: float = 0.4,
    reference: tuple[float, float] = DEFAULT_REFERENCE,
) -> ProgramSpec:
    """A program of ``kernels`` random kernels (see :class:`ProgramGenerator` for more
    options)."""
    generator = ProgramGenerator(
        parameters=parameters, reference=reference, communication_share=communication_share
    )
    return generator.random_program(name, kernels, rng)


MAX_COUNT = 2.0**62
"""Most iterations of a term's loops, or doubles in a message, at the reference: the
generated program counts them in a 64-bit ``long long``, and a count beyond it (``1e300*n``)
would overflow there. (A term beyond the doubles, ``n^100`` at n = 5000, made a coefficient
of zero and a ZeroDivisionError: :func:`_basis` refuses it.)"""


def _basis(factors: Sequence[Factor], point: dict[str, float]) -> float:
    value = float(Term(1.0, tuple(factors)).basis({k: np.asarray(v) for k, v in point.items()}))
    where = ", ".join(f"{name}={v:g}" for name, v in point.items())
    if not value > 0:
        raise InputError(f"term {' * '.join(f.text() for f in factors)} vanishes at {where}")
    if not np.isfinite(value):
        raise InputError(
            f"term {' * '.join(f.text() for f in factors)} at {where} is beyond the doubles "
            "(1.8e308): lower its exponents or --reference"
        )
    return value


def _check_count(coefficient: float, factors: Sequence[Factor], point: dict[str, float]) -> None:
    """Refuse a given coefficient whose term exceeds :data:`MAX_COUNT` at the reference."""
    count = coefficient * _basis(factors, point)
    if not count <= MAX_COUNT:
        where = ", ".join(f"{name}={v:g}" for name, v in point.items())
        raise InputError(
            f"term {coefficient:g} * {' * '.join(f.text() for f in factors)} is {count:.3g} at "
            f"{where}, beyond the {MAX_COUNT:.3g} (2^62) a generated program counts: lower "
            "its coefficient or --reference"
        )


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))
