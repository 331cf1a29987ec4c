"""Bridge between the binary and the source: which source domain each block executes in.

For one concrete binary function:

1. every instruction's DWARF frame chain is resolved to a :class:`Place` in the source
   tree, descending into inlined callees through their call sites;
2. every natural loop of the CFG is matched to the source loop its exit test belongs to,
   and gets the source iterations it does per trip (vector width x unroll factor);
   several binary loops for one source loop are a main loop and remainder loops;
3. flow conservation with the loop facts fixes most block counts; the blocks left (a
   branch arm, a straight-line remainder) take the count of their most specific place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from perfcast.static import expressions as ex
from perfcast.static.arithmetic import evaluate_formula
from perfcast.static.disassembly import BinaryFunction, Frame, Instruction
from perfcast.static.domains import (
    Combination,
    Counter,
    DomainBuilder,
    Instance,
    Place,
    Symbol,
    SymbolTable,
    common_ancestor,
)
from perfcast.static.flow import EdgeIndex, FlowSystem
from perfcast.static.formulas import large_point, python_expression
from perfcast.static.loops import BinaryLoop, Stride, natural_loops, stride
from perfcast.static.source import SourceFunction, SourceProgram

SAMPLE_RESIDUES = 8
"""Sample points for deciding idle branches cover parameter residues modulo this (a
multiple of every vector width times unroll factor the compiler is expected to use)."""


@dataclass
class LoopMatch:
    loop: BinaryLoop
    place: Place | None
    stride: Stride
    role: str = "main"  # "main" | "remainder" | "copy"
    previous: int | None = None  # group size of the loop that ran before this remainder


@dataclass
class MappedFunction:
    """Counts of one binary function's blocks as combinations of symbols."""

    binary: BinaryFunction
    source: SourceFunction
    root: Instance
    symbols: SymbolTable
    block_counts: dict[int, Combination]
    places: dict[int, Place | None]  # instruction address -> place
    loops: list[LoopMatch]
    domains: DomainBuilder
    warnings: list[str] = field(default_factory=list)

    def place_of(self, instruction: Instruction) -> Place | None:
        return self.places.get(instruction.address)


class PlaceResolver:
    """Resolves frame chains to places, creating an instance per inlined call site."""

    def __init__(self, program: SourceProgram, root: Instance):
        self.functions = program.by_key()
        self.root = root
        self._instances: dict[tuple[int, int, tuple[str, int]], Instance] = {}

    def resolve(self, frames: tuple[Frame, ...]) -> Place | None:
        if not frames:
            return None
        first = frames[0]
        function = self.root.function
        if first.function is None or self.functions.get(first.function) is not function:
            return None
        location = first.location
        place = Place(self.root, function.root.innermost(location.file, location.position))
        for depth in range(1, len(frames)):
            frame = frames[depth]
            callee = self.functions.get(frame.function) if frame.function else None
            if callee is None:
                break  # a library or header function: stay at the call site
            call_location = frames[depth - 1].location
            instance = self._instance(place, callee, call_location)
            location = frame.location
            if location.file != callee.file:
                break
            place = Place(instance, callee.root.innermost(location.file, location.position))
        return place

    def _instance(self, place: Place, callee: SourceFunction, call_location) -> Instance:
        call = _find_call(place, callee, call_location)
        anchor = call or place
        key = (id(anchor.instance), id(anchor.construct), callee.key)
        if key not in self._instances:
            binding: dict[str, ex.Expr] = {}
            if call is not None:
                for name, argument in zip(
                    callee.parameters, call.construct.arguments, strict=False
                ):
                    binding[name] = argument
            tag = f"_{call_location.line}"
            self._instances[key] = Instance(callee, binding, anchor, tag)
        return self._instances[key]


def _find_call(place: Place, callee: SourceFunction, location) -> Place | None:
    """The call construct for an inlined callee: the same callee, closest to the location."""
    best, best_distance = None, None
    for node in place.instance.function.root.walk():
        if node.kind != "call" or node.callee is None:
            continue
        if (
            node.callee[1] not in callee.declaration_lines | {callee.line}
            or node.callee[0] != callee.file
        ):
            continue
        if not node.start[0] <= location.line <= node.end[0]:
            continue
        distance = abs(node.start[0] - location.line) * 1000 + abs(node.start[1] - location.column)
        if best_distance is None or distance < best_distance:
            best, best_distance = node, distance
    return Place(place.instance, best) if best is not None else None


def _loop_ancestor(place: Place | None) -> Place | None:
    node = place
    while node is not None and not node.is_loop:
        node = node.parent()
    return node


class FunctionMapper:
    """Maps one binary function onto its source function and solves its block counts.

    Assumptions, documented because they decide counts the source cannot: runtime alias
    checks of vectorised loops pass (the vector path runs), a second binary copy of a loop
    with the same group size is such a fallback and does not run, and compiler-made
    branches with no source counterpart follow the cheapest non-negative flow.
    """

    def __init__(self, program: SourceProgram, binary: BinaryFunction, source: SourceFunction):
        self.program = program
        self.binary = binary
        self.source = source
        self.root = Instance(source, {}, None, "")
        self.resolver = PlaceResolver(program, self.root)
        self.domains = DomainBuilder()
        self.symbols = SymbolTable()
        self.warnings: list[str] = []
        self.places = {
            ins.address: self.resolver.resolve(ins.frames) for ins in binary.instructions()
        }
        self._counter = Counter()
        self._sample_key: tuple[str, ...] | None = None
        self._samples: list[dict[str, float]] = []

    # --- loops -------------------------------------------------------------------------
    def match_loops(self) -> list[LoopMatch]:
        loops = natural_loops(self.binary)
        places: dict[int, Place | None] = {}
        # Inner loops first: an outer binary loop must then strictly enclose the source
        # loops of its inner ones, whatever line its latch carries (gcc gives the latch of
        # an outer loop the line of the inner loop's header).
        for loop in sorted(loops, key=lambda lp: -lp.depth()):
            inner = [places[id(c)] for c in loop.children if places.get(id(c)) is not None]
            places[id(loop)] = self._source_loop(loop, [p for p in inner if p is not None])
        matches: list[LoopMatch] = []
        for loop in loops:
            place = places[id(loop)]
            construct = place.construct if place else None
            header = construct.loop if construct is not None else None
            element = construct.element_size if construct is not None else 0
            source_step = header.step if header is not None and not header.unknown else 1
            matches.append(LoopMatch(loop, place, stride(self.binary, loop, element, source_step)))
            if place is None:
                self.warnings.append(
                    f"{self.binary.name}: binary loop at {loop.header:#x} matches no source loop"
                )
        groups: dict[tuple[int, Place], list[LoopMatch]] = {}
        for match in matches:
            if match.place is not None:
                parent = id(match.loop.parent) if match.loop.parent else 0
                groups.setdefault((parent, match.place), []).append(match)
        for group in groups.values():
            # One source loop, several binary loops: each handles complete groups of its
            # size from what the larger ones left (vector body, unrolled scalar loop,
            # scalar epilogue). A second loop of an already seen size is a fallback copy
            # (taken when a runtime alias check fails), assumed not to run.
            group.sort(key=lambda m: (-m.stride.elements, m.loop.header))
            sizes: list[int] = []
            for match in group:
                if match.stride.elements in sizes:
                    match.role = "copy"
                    continue
                if sizes:
                    match.role, match.previous = "remainder", sizes[-1]
                sizes.append(match.stride.elements)
        return matches

    def _source_loop(self, loop: BinaryLoop, inner: list[Place]) -> Place | None:
        """The source loop of a binary loop: where its exit test comes from, else the
        loop around everything its own blocks do; raised until it encloses ``inner``."""
        candidates: list[Place] = []
        for source, _target in loop.back_edges:
            place = self.places.get(self.binary.blocks[source].instructions[-1].address)
            if place is not None and place.is_loop:
                candidates.append(place)
        own = [
            found
            for start in loop.own_blocks()
            for ins in self.binary.blocks[start].instructions
            if (found := self.places.get(ins.address)) is not None
        ]
        common = _loop_ancestor(common_ancestor(own))
        if common is not None:
            candidates.append(common)
        for candidate in candidates:
            chosen: Place | None = candidate
            while chosen is not None and not all(
                p != chosen and p.is_within(chosen) for p in inner
            ):
                chosen = _loop_ancestor(chosen.parent())
            if chosen is not None:
                return chosen
        return None

    # --- symbols -----------------------------------------------------------------------
    def _symbol(
        self,
        place: Place,
        *,
        elements: int = 1,
        previous: int | None = None,
        project: bool = False,
    ) -> str:
        """Name of the count of ``place``'s domain (for a loop place: of the iterations in
        complete groups of ``elements`` not already in groups of ``previous``); with
        ``project``, of the entries into that part (points of the enclosing loops)."""
        domain = self.domains.domain(place)
        for warning in domain.warnings:
            if warning not in self.warnings:
                self.warnings.append(warning)
        if not domain.dims and not domain.constraints and not domain.multipliers:
            return self.symbols.one
        text = domain.part_text(elements, previous)
        self.symbols.parameters.free.update(domain.parameters.free)
        self.symbols.parameters.derived.update(domain.parameters.derived)
        what = "entries into" if project else "executions of"
        if elements > 1 or previous:
            what += f" the part done {elements} per trip"
            what += f" after groups of {previous}" if previous else ""
            what += " of"
        symbol = Symbol(text, project, domain.multipliers, f"{what} {place.describe()}")
        return self.symbols.name(symbol)

    def loop_facts(self, match: LoopMatch) -> tuple[Combination, Combination] | None:
        """(iterations, entries) of a binary loop as combinations of symbols."""
        if match.place is None:
            return None
        if match.role == "copy":
            return {}, {}
        elements = match.stride.elements
        iterations = self._symbol(match.place, elements=elements, previous=match.previous)
        entries = self._symbol(
            match.place, elements=elements, previous=match.previous, project=True
        )
        return {iterations: Fraction(1, elements)}, {entries: Fraction(1)}

    # --- blocks ------------------------------------------------------------------------
    def solve(self) -> MappedFunction:
        matches = self.match_loops()
        blocks = self.binary.blocks
        index = EdgeIndex(
            {s: b.successors for s, b in blocks.items()},
            {s for s, b in blocks.items() if b.exits},
            self.binary.entry,
        )
        system = FlowSystem(self._vanishes)
        one = self.symbols.one
        system.add({0: Fraction(1)}, {one: Fraction(1)})
        for start in blocks:
            row = {e: Fraction(1) for e in index.incoming[start]}
            for e in index.outgoing[start]:
                row[e] = row.get(e, Fraction(0)) - 1
            system.add(row, {})
        # Inner loops first: they carry most of the work, and when a compiler trims an
        # outer loop (gcc drops a last outer iteration whose inner loop is empty) the
        # outer fact is the one that yields.
        for match in sorted(matches, key=lambda m: -m.loop.depth()):
            facts = self.loop_facts(match)
            if facts is None:
                continue
            iterations, entries = facts
            entering = index.edge_row(match.loop.entering_edges(self.binary))
            back = index.edge_row(match.loop.back_edges)
            backs: Combination = dict(iterations)
            for name, value in entries.items():
                backs[name] = backs.get(name, Fraction(0)) - value
            backs = {k: v for k, v in backs.items() if v}
            if not (system.add(entering, entries) and system.add(back, backs)):
                self.warnings.append(
                    f"{self.binary.name}: binary loop at {match.loop.header:#x} does not run as "
                    "often as its source loop (the compiler reshaped it); its count follows "
                    "from the loops around and inside it"
                )
        innermost = self._innermost_loops(matches)
        for start in sorted(blocks):
            row = index.block_row(start)
            if system.value(row) is not None:
                continue
            estimate = self._block_estimate(start, innermost.get(start), matches)
            if estimate is not None:
                system.add(row, estimate)
        # Branches nothing above decides (runtime alias checks, unroller guards) are
        # compiler-made. Which of them are never taken is read off a flow that is
        # non-negative at a large generic parameter point and takes as few jumps as
        # possible (compilers lay the likely successor out as the fall-through); any
        # edge still open is assumed not taken, taken jumps first.
        for variable in self._idle_edges(system, index, blocks):
            system.add({variable: Fraction(1)}, {})
        # A loop-header test outside the loop's binary loops (the check for leftover
        # iterations after a vector loop, say) runs once per entry into the source loop.
        for start in sorted(blocks):
            row = index.block_row(start)
            if system.value(row) is None:
                header = self._header_place(start, matches)
                if header is not None:
                    system.add(row, {self._symbol(header, project=True): Fraction(1)})
        order = sorted(range(len(index.edges)), key=lambda e: (not index.is_jump(e, blocks), -e))
        for variable in order:
            if system.value({variable: Fraction(1)}) is None:
                system.add({variable: Fraction(1)}, {})
        counts: dict[int, Combination] = {}
        for start in blocks:
            counts[start] = system.value(index.block_row(start)) or {}
        self._apply_skips(counts)
        return MappedFunction(
            self.binary,
            self.source,
            self.root,
            self.symbols,
            counts,
            self.places,
            matches,
            self.domains,
            self.warnings,
        )

    def _idle_edges(self, system: FlowSystem, index: EdgeIndex, blocks) -> list[int]:
        """Edges with no flow in the cheapest non-negative flow at every sample point."""
        from scipy.optimize import linprog

        if not system.free_variables(range(len(index.edges))):
            return []
        free = range(len(index.edges))
        cost = [1.0 if index.is_jump(e, blocks) else 1e-3 for e in range(len(index.edges))]
        idle = set(free)
        for values in self._numeric_symbols():
            rows, rhs = [], []
            for pivot, (row, combination) in system.pivots.items():
                dense = [0.0] * len(index.edges)
                for variable, coefficient in row.items():
                    dense[variable] = float(coefficient)
                dense[pivot] = 1.0
                rows.append(dense)
                rhs.append(sum(float(c) * values[s] for s, c in combination.items()))
            result = linprog(cost, A_eq=rows, b_eq=rhs, bounds=(0, None), method="highs")
            if not result.success:
                continue
            idle &= {e for e in free if result.x[e] < 0.5}  # flows are whole numbers
        return sorted(idle, key=lambda e: (not index.is_jump(e, blocks), -e))

    def _vanishes(self, combination: Combination) -> bool:
        """Is the combination zero at every sample point (so, in all likelihood, always)?"""
        samples = self._numeric_symbols()
        return all(
            abs(sum(float(c) * values[s] for s, c in combination.items())) < 0.5
            for values in samples
        )

    def _numeric_symbols(self) -> list[dict[str, float]]:
        """Every symbol's value at large parameter points that cover all residues modulo
        the usual vector/unroll group sizes (branch fractions at 1/2)."""
        parameters = self.symbols.parameters
        points = []
        for shift in range(SAMPLE_RESIDUES):
            point: dict[str, object] = {
                name: value + (shift + k) % SAMPLE_RESIDUES
                for k, (name, value) in enumerate(large_point(parameters.free).items())
            }
            for name, expression in parameters.derived.items():
                point[name] = evaluate_formula(expression, point)
            points.append(point)
        key = tuple(sorted(parameters.free)) + tuple(sorted(parameters.derived))
        if key != self._sample_key:
            self._sample_key, self._samples = key, [{} for _ in points]
        for symbol, name in self.symbols.symbols.items():
            if name in self._samples[0]:
                continue
            expression = python_expression(self._counter.count(symbol))
            for point, values in zip(points, self._samples, strict=True):
                value = evaluate_formula(expression, point)
                for _ in symbol.multipliers:
                    value = value * Fraction(1, 2)
                values[name] = float(value)
        return self._samples

    def _header_place(self, start: int, matches: list[LoopMatch]) -> Place | None:
        """The source loop whose header alone this block's instructions come from, if that
        loop has binary loops and the block is in none of them."""
        places = {self.places.get(ins.address) for ins in self.binary.blocks[start].instructions}
        places.discard(None)
        if len(places) != 1:
            return None
        (place,) = places
        if place is None or not place.is_loop:
            return None
        for match in matches:
            if match.place == place and start in match.loop.blocks:
                return None
        return place if any(m.place == place for m in matches) else None

    def _innermost_loops(self, matches: list[LoopMatch]) -> dict[int, LoopMatch]:
        table: dict[int, LoopMatch] = {}
        for match in sorted(matches, key=lambda m: m.loop.depth()):
            for start in match.loop.blocks:
                table[start] = match
        return table

    def _block_estimate(
        self, start: int, context: LoopMatch | None, matches: list[LoopMatch]
    ) -> Combination | None:
        """Count of a block that flow and loop facts leave open: a source branch arm's
        domain, or the straight-line remainder of an unrolled loop."""
        places = [
            p
            for p in (
                self.places.get(ins.address) for ins in self.binary.blocks[start].instructions
            )
            if p is not None
        ]
        outer = context.place if context is not None else None
        # The loop's own increment and test may be copied into each arm of a branch
        # (gcc duplicates the latch): they say nothing about which arm this is.
        places = [p for p in places if p != outer] or places
        common = common_ancestor(places)
        if common is None:
            return None
        if outer is not None and not common.is_within(outer):
            return None
        chain = common.chain()
        below = chain[chain.index(outer) + 1 :] if outer is not None else chain
        inner_loops = [p for p in below if p.is_loop]
        if not inner_loops:
            if any(p.construct.kind == "branch" for p in below):
                return {self._symbol(common): Fraction(1)}
            return None
        first = inner_loops[0]
        parent = context.loop if context is not None else None
        group = [
            m for m in matches if m.place == first and m.loop.parent is parent and m.role != "copy"
        ]
        smallest = min((m.stride.elements for m in group), default=1)
        # A straight-line remainder holds loop-body work; guards only test the header.
        inside_body = any(p != first and p.is_within(first) for p in places)
        if smallest > 1 and inside_body:
            symbol = self._symbol(first, elements=1, previous=smallest, project=True)
            return {symbol: Fraction(1)}
        return None

    def _apply_skips(self, counts: dict[int, Combination]) -> None:
        for start, block in self.binary.blocks.items():
            places = [self.places.get(ins.address) for ins in block.instructions]
            known = [p for p in places if p is not None]
            if known and all(p.construct.skipped for p in known):
                counts[start] = {}
