"""Iteration domains of source constructs, as isl sets, and their parametric point counts.

A :class:`Place` is a construct of a source function *as seen from one concrete binary
function*: inlined callees are instances whose parameters are bound to the call's
arguments, so a loop of an inlined ``dot(n, x, y)`` called inside ``for (it < iters)``
gets the two-dimensional domain ``{[it, i] : 0 <= it < iters and 0 <= i < n}``.

Counting (isl + barvinok, GPL) happens here and nowhere else in perfcast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

from perfcast.errors import PerfcastError
from perfcast.lazy import optional_module
from perfcast.static import expressions as ex
from perfcast.static.source import Construct, SourceFunction


def _isl():
    islpy = optional_module(
        "islpy",
        "perfcast static needs isl with barvinok",
        "pip install 'perfcast[static]' (islpy-barvinok, GPL)",
    )
    if not hasattr(islpy.Set, "card"):
        raise PerfcastError("islpy has no barvinok counting: install islpy-barvinok, not islpy")
    return islpy


@dataclass(eq=False)
class Instance:
    """A source function inside the concrete function under analysis (inlined or not)."""

    function: SourceFunction
    binding: dict[str, ex.Expr]  # parameter -> expression over the root's variables
    call: Place | None = None  # the call construct it was inlined at
    tag: str = ""  # distinguishes the loop indices of different inlined copies

    def place(self, construct: Construct) -> Place:
        return Place(self, construct)


@dataclass(frozen=True, eq=True)
class Place:
    instance: Instance
    construct: Construct

    def parent(self) -> Place | None:
        if self.construct.parent is not None:
            return Place(self.instance, self.construct.parent)
        return self.instance.call

    def chain(self) -> list[Place]:
        """Root first, self last."""
        places: list[Place] = []
        node: Place | None = self
        while node is not None:
            places.append(node)
            node = node.parent()
        return places[::-1]

    def is_within(self, other: Place) -> bool:
        return other in self.chain()

    @property
    def is_loop(self) -> bool:
        return self.construct.kind == "loop"

    def describe(self) -> str:
        c = self.construct
        where = f"{c.file.rsplit('/', 1)[-1]}:{c.line}"
        return f"{c.kind} at {where}" + (
            f" (in {self.instance.function.name})" if self.instance.tag else ""
        )


def common_ancestor(places: list[Place]) -> Place | None:
    if not places:
        return None
    chains = [p.chain() for p in places]
    common = None
    for level in zip(*chains, strict=False):
        if all(p == level[0] for p in level):
            common = level[0]
        else:
            break
    return common


@dataclass
class LoopSplit:
    """What the main/remainder split of the innermost loop needs."""

    dim: str
    init: str
    step: int
    conditions: list[ex.Expr]


@dataclass
class Domain:
    """Set dimensions, constraints and parameters of one place."""

    dims: list[str]
    constraints: list[str]
    parameters: ex.ParameterTable
    multipliers: tuple[str, ...]
    loop: LoopSplit | None
    mapping: dict[str, ex.Expr]  # the place's variables -> dimensions and outer words
    warnings: list[str] = field(default_factory=list)

    def isl_text(self, extra: tuple[str, ...] = ()) -> str:
        params = sorted(set(self.parameters.free) | set(self.parameters.derived))
        body = " and ".join([*self.constraints, *extra]) or "true"
        return f"[{', '.join(params)}] -> {{ [{', '.join(self.dims)}] : {body} }}"

    def _in_groups(self, elements: int) -> str | None:
        """Condition: the point lies in a complete group of ``elements`` consecutive
        iterations of the innermost loop, groups counted from its first iteration (what a
        loop doing ``elements`` source iterations per trip executes)."""
        if self.loop is None or elements == 1:
            return None
        split = self.loop
        span = abs(split.step) * elements
        if split.step > 0:
            first = f"(({split.init}) + {span} * floor(({split.dim} - ({split.init}))/{span}))"
        else:
            first = f"(({split.init}) - {span} * floor((({split.init}) - {split.dim})/{span}))"
        last = f"({first} + {split.step * (elements - 1)})"
        writer = ex.IslWriter({split.dim: last}, self.parameters)
        return " and ".join(f"({writer.condition(c)})" for c in split.conditions) or None

    def part_text(self, elements: int, previous: int | None = None) -> str:
        """Iterations in complete groups of ``elements`` but not of ``previous`` (a larger
        group size handled by an earlier loop); ``elements`` 1 means single iterations."""
        extra = []
        inside = self._in_groups(elements)
        if inside:
            extra.append(inside)
        before = self._in_groups(previous) if previous else None
        if before:
            extra.append(f"not ({before})")
        return self.isl_text(tuple(extra))


class DomainBuilder:
    """Builds (and caches) the domain of every place."""

    def __init__(self) -> None:
        self._cache: dict[Place, Domain] = {}

    def domain(self, place: Place) -> Domain:
        if place not in self._cache:
            self._cache[place] = self._build(place)
        return self._cache[place]

    def _build(self, place: Place) -> Domain:
        dims: list[str] = []
        constraints: list[str] = []
        multipliers: list[str] = []
        parameters = ex.ParameterTable.empty()
        warnings: list[str] = []
        renames: dict[int, dict[str, ex.Expr]] = {}
        split: LoopSplit | None = None
        for node in place.chain():
            instance, construct = node.instance, node.construct
            mapping = renames.get(id(instance))
            if mapping is None:
                # Arguments are written in the caller's words: translate them with the
                # caller's mapping as it stands at the call (its loop indices renamed).
                outer = renames.get(id(instance.call.instance), {}) if instance.call else {}
                mapping = {p: ex.substitute(a, outer) for p, a in instance.binding.items()}
                # Locals fixed at their declaration are in the function's own parameters.
                for local, value in instance.function.derived_locals.items():
                    mapping[local] = ex.substitute(value, mapping)
                renames[id(instance)] = mapping
            split = None
            if construct.kind == "loop" and construct.loop is not None:
                header = construct.loop
                dim = ex.sanitize(header.iv + instance.tag)
                while dim in dims or dim in parameters.free:
                    dim += "_"
                writer = ex.IslWriter({d: d for d in [*dims, dim]}, parameters)
                try:
                    if header.unknown:
                        raise ex.NotAffine(header.unknown)
                    init = writer.affine(ex.substitute(header.init, mapping))
                    mapping[header.iv] = ex.Var(dim)
                    conditions = [ex.substitute(c, mapping) for c in header.conditions]
                    own = [writer.condition(c) for c in conditions]
                    bound = f"{dim} >= {init}" if header.step > 0 else f"{dim} <= {init}"
                    step = header.step
                    if abs(step) > 1:
                        bound += f" and exists (k_{dim} : {dim} = {init} + {step} * k_{dim})"
                except ex.NotAffine as exc:
                    iterations = header.iterations or f"iters_{construct.line}"
                    parameters.add_free(
                        iterations,
                        f"iterations per entry of the loop at line {construct.line} "
                        f"({exc}; annotate it with #pragma @Annotation)",
                    )
                    if not header.unknown:
                        warnings.append(
                            f"{construct.file}:{construct.line}: loop outside the polyhedral "
                            f"model ({exc}); its trip count is the parameter {iterations}"
                        )
                    mapping[header.iv] = ex.Var(dim)
                    init, step = "0", 1
                    conditions = [ex.Binary("<", ex.Var(dim), ex.Var(iterations))]
                    own = [f"{dim} < {iterations}"]
                    bound = f"{dim} >= 0"
                dims.append(dim)
                constraints += [bound, *own]
                split = LoopSplit(dim, init, step, conditions)
            elif construct.kind == "branch":
                if construct.ratio is not None:
                    multipliers.append(construct.ratio)
                    parameters.add_free(
                        construct.ratio, f"fraction taking the branch at line {construct.line}"
                    )
                    continue
                assert construct.condition is not None
                writer = ex.IslWriter({d: d for d in dims}, parameters)
                try:
                    constraints.append(
                        writer.condition(ex.substitute(construct.condition, mapping))
                    )
                except ex.NotAffine as exc:
                    ratio = f"ratio_{construct.line}" + ("_else" if _is_else(construct) else "")
                    multipliers.append(ratio)
                    parameters.add_free(
                        ratio,
                        f"fraction taking the branch at line {construct.line} ({exc})",
                    )
                    warnings.append(
                        f"{construct.file}:{construct.line}: branch outside the polyhedral model "
                        f"({exc}); its taken fraction is the parameter {ratio}"
                    )
        mapping = renames.get(id(place.instance), {})
        return Domain(dims, constraints, parameters, tuple(multipliers), split, mapping, warnings)


def _is_else(construct: Construct) -> bool:
    return isinstance(construct.condition, ex.Unary) and construct.condition.op == "!"


@dataclass(frozen=True)
class Symbol:
    """A parametric count the model is built from: points of a set or of its projection
    onto the enclosing loops (how often a loop is entered), times branch fractions."""

    text: str
    project: bool
    multipliers: tuple[str, ...]
    description: str


class Counter:
    """isl/barvinok counts of symbols, cached by set text."""

    def __init__(self) -> None:
        self.isl = _isl()
        self._counts: dict[tuple[str, bool], object] = {}

    def count(self, symbol: Symbol):
        key = (symbol.text, symbol.project)
        if key not in self._counts:
            try:
                points = self.isl.Set(symbol.text)
            except self.isl.Error as exc:
                raise PerfcastError(f"isl rejected the domain {symbol.text}: {exc}") from exc
            if symbol.project:
                dims = points.dim(self.isl.dim_type.set)
                points = points.project_out(self.isl.dim_type.set, dims - 1, 1)
            self._counts[key] = points.card()
        return self._counts[key]


ONE = Symbol("{ [] : true }", False, (), "once per call")


@dataclass
class SymbolTable:
    """Symbols in use by one function, named s0, s1, ... in the generated model."""

    symbols: dict[Symbol, str] = field(default_factory=dict)
    parameters: ex.ParameterTable = field(default_factory=ex.ParameterTable.empty)

    def name(self, symbol: Symbol) -> str:
        if symbol not in self.symbols:
            self.symbols[symbol] = f"s{len(self.symbols)}"
        return self.symbols[symbol]

    @cached_property
    def one(self) -> str:
        return self.name(ONE)


Combination = dict[str, Fraction]
"""A count as a linear combination of named symbols."""
