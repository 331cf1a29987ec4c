"""Natural loops of a binary function and how many source iterations each one does.

A natural loop is the set of blocks that reach a back edge's source without passing its
header (the header dominates the source). Vectorised and unrolled loops do several source
iterations per trip; the count is read off the induction variable that the exit test
compares: its constant step, in elements when it indexes memory with a scale, in bytes
when it is a pointer or a byte offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfcast.static.disassembly import BinaryFunction, Instruction

FLAG_SETTERS = frozenset({"cmp", "test", "add", "sub", "inc", "dec", "and", "or", "xor", "neg"})
FLOAT_SUFFIX_SIZES = {"pd": 8, "sd": 8, "ps": 4, "ss": 4}


@dataclass(eq=False)
class BinaryLoop:
    header: int
    blocks: set[int]
    back_edges: list[tuple[int, int]]
    parent: BinaryLoop | None = None
    children: list[BinaryLoop] = field(default_factory=list)

    def own_blocks(self) -> set[int]:
        """Blocks of this loop that are in none of its inner loops."""
        inner: set[int] = set()
        for child in self.children:
            inner |= child.blocks
        return self.blocks - inner

    def entering_edges(self, function: BinaryFunction) -> list[tuple[int, int]]:
        return [
            (start, self.header)
            for start, block in function.blocks.items()
            if self.header in block.successors and start not in self.blocks
        ]

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()


def predecessors(function: BinaryFunction) -> dict[int, list[int]]:
    preds: dict[int, list[int]] = {start: [] for start in function.blocks}
    for start, block in function.blocks.items():
        for successor in block.successors:
            preds[successor].append(start)
    return preds


def dominators(function: BinaryFunction) -> dict[int, set[int]]:
    """Iterative data-flow dominators over blocks reachable from the entry."""
    preds = predecessors(function)
    reachable, stack = set(), [function.entry]
    while stack:
        node = stack.pop()
        if node in reachable or node not in function.blocks:
            continue
        reachable.add(node)
        stack.extend(function.blocks[node].successors)
    dom = {node: set(reachable) for node in reachable}
    dom[function.entry] = {function.entry}
    changed = True
    order = sorted(reachable)
    while changed:
        changed = False
        for node in order:
            if node == function.entry:
                continue
            incoming = [dom[p] for p in preds[node] if p in reachable]
            new = set.intersection(*incoming) | {node} if incoming else {node}
            if new != dom[node]:
                dom[node] = new
                changed = True
    return dom


def natural_loops(function: BinaryFunction) -> list[BinaryLoop]:
    """All natural loops (one per header), outermost first, with parent/child links."""
    dom = dominators(function)
    preds = predecessors(function)
    by_header: dict[int, BinaryLoop] = {}
    for source in dom:
        for target in function.blocks[source].successors:
            if target in dom.get(source, set()):
                body, stack = {target, source}, [source]
                while stack:
                    node = stack.pop()
                    if node == target:
                        continue
                    for pred in preds[node]:
                        if pred not in body and pred in dom:
                            body.add(pred)
                            stack.append(pred)
                loop = by_header.setdefault(target, BinaryLoop(target, set(), []))
                loop.blocks |= body
                loop.back_edges.append((source, target))
    loops = sorted(by_header.values(), key=lambda lp: -len(lp.blocks))
    for index, loop in enumerate(loops):
        candidates = [o for o in loops[:index] if loop.blocks < o.blocks]
        if candidates:
            loop.parent = min(candidates, key=lambda o: len(o.blocks))
            loop.parent.children.append(loop)
    return sorted(loops, key=lambda lp: (lp.depth(), lp.header))


def _register(capstone_instruction, reg_id: int) -> str:
    return _widest(capstone_instruction.reg_name(reg_id))


_PARTS = {
    "a": "rax",
    "b": "rbx",
    "c": "rcx",
    "d": "rdx",
    "si": "rsi",
    "di": "rdi",
    "bp": "rbp",
    "sp": "rsp",
}


def _widest(name: str) -> str:
    """``eax``/``ax``/``al`` -> ``rax``; ``r9d`` -> ``r9``: registers as one variable."""
    if name.startswith("r") and name[1:2].isdigit():
        return name.rstrip("dwb")
    core = name.lstrip("re")
    for suffix in ("x", "l", "h"):
        if core.endswith(suffix) and core[:-1] in _PARTS and len(core) == 2:
            return _PARTS[core[:-1]]
    return _PARTS.get(core, name)


@dataclass(frozen=True)
class Stride:
    """Source iterations per trip of a binary loop, and how that was found."""

    elements: int
    register: str | None
    step: int
    unit: str  # "elements", "bytes" or "unknown"


def _constant_updates(function: BinaryFunction, loop: BinaryLoop) -> dict[str, int | None]:
    """Register -> constant step per trip; None when it is also written otherwise, or
    stepped in several blocks (alternative paths, as gcc emits for an if-else body)."""
    import capstone

    updates: dict[str, int | None] = {}
    stepped_in: dict[str, int] = {}
    for start in loop.blocks:
        for ins in function.blocks[start].instructions:
            raw = ins.detail
            ops = raw.operands
            step = None
            if (
                ins.mnemonic in ("add", "sub")
                and len(ops) == 2
                and ops[1].type == capstone.x86.X86_OP_IMM
            ):
                if ops[0].type == capstone.x86.X86_OP_REG:
                    step = int(ops[1].imm) * (1 if ins.mnemonic == "add" else -1)
            elif ins.mnemonic in ("inc", "dec") and ops and ops[0].type == capstone.x86.X86_OP_REG:
                step = 1 if ins.mnemonic == "inc" else -1
            elif ins.mnemonic == "lea" and len(ops) == 2:
                mem = ops[1].mem
                if (
                    mem.index == 0
                    and mem.base != 0
                    and _register(raw, mem.base) == _register(raw, ops[0].reg)
                ):
                    step = int(mem.disp)
            try:
                _read, written = raw.regs_access()
            except Exception:  # capstone cannot analyse a few instructions
                written = []
            for reg in written:
                name = _register(raw, reg)
                if name in ("rflags", "rip", "rsp"):
                    continue
                if (
                    step is not None
                    and ops
                    and ops[0].type == capstone.x86.X86_OP_REG
                    and name == _register(raw, ops[0].reg)
                ):
                    previous = updates.get(name, 0)
                    if stepped_in.setdefault(name, start) != start:
                        previous = None
                    updates[name] = None if previous is None else previous + step
                else:
                    updates[name] = None
    return updates


def _exit_test(function: BinaryFunction, loop: BinaryLoop) -> list[Instruction]:
    """Flag-setting instructions that decide whether the loop goes round again."""
    tests = []
    latches = {source for source, _ in loop.back_edges}
    ordered = sorted(loop.blocks, key=lambda b: (b not in latches, b))
    for start in ordered:
        block = function.blocks[start]
        last = block.instructions[-1]
        if not last.mnemonic.startswith("j") or last.mnemonic == "jmp":
            continue
        if all(s in loop.blocks for s in block.successors) and not block.exits:
            continue
        for ins in reversed(block.instructions[:-1]):
            if ins.mnemonic in FLAG_SETTERS:
                tests.append(ins)
                break
    return tests


def _float_element_size(function: BinaryFunction, loop: BinaryLoop) -> int:
    for start in loop.blocks:
        for ins in function.blocks[start].instructions:
            size = FLOAT_SUFFIX_SIZES.get(ins.mnemonic[-2:], 0)
            if size:
                return size
    return 0


def stride(
    function: BinaryFunction, loop: BinaryLoop, element_size: int, source_step: int
) -> Stride:
    """Source iterations per trip of ``loop`` (1 when nothing better can be said).

    Args:
        element_size: bytes per array element in the source loop (0 if unknown: then the
            floating-point mnemonics of the loop decide).
        source_step: the source loop's own step (``i += 2`` -> 2).
    """
    import capstone

    updates = _constant_updates(function, loop)
    for test in _exit_test(function, loop):
        raw = test.detail
        candidates = [
            _register(raw, op.reg) for op in raw.operands if op.type == capstone.x86.X86_OP_REG
        ]
        for register in candidates:
            step = updates.get(register)
            if not step:
                continue
            unit = _unit(function, loop, register)
            size = element_size or _float_element_size(function, loop) or 1
            per_trip = abs(step) if unit != "bytes" else abs(step) / size
            per_trip /= abs(source_step) or 1
            if per_trip >= 1 and float(per_trip).is_integer():
                return Stride(int(per_trip), register, step, unit)
    return Stride(1, None, 0, "unknown")


def _unit(function: BinaryFunction, loop: BinaryLoop, register: str) -> str:
    import capstone

    scaled = unscaled = False
    for start in loop.blocks:
        for ins in function.blocks[start].instructions:
            raw = ins.detail
            for op in raw.operands:
                if op.type != capstone.x86.X86_OP_MEM:
                    continue
                mem = op.mem
                if mem.index and _register(raw, mem.index) == register:
                    if mem.scale > 1:
                        scaled = True
                    else:
                        unscaled = True
                if mem.base and _register(raw, mem.base) == register:
                    unscaled = True
    if scaled:
        return "elements"
    return "bytes" if unscaled else "counter"
