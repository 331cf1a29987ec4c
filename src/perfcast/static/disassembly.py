"""Binary side: functions, DWARF line and inline information, and basic blocks.

What the compiler really emitted is read from the ELF file: symbols give the functions,
capstone decodes their instructions into basic blocks and a control-flow graph, and the
DWARF line table plus the ``DW_TAG_inlined_subroutine`` tree give every instruction a
*frame chain*: where it is in the concrete function and, when it was inlined, in each
callee. Source functions are identified by their declaration (file, line), which is what
DWARF records (``DW_AT_decl_line``), so C++ templates and constructors need no mangling.
"""

from __future__ import annotations

import bisect
import io
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.lazy import optional_module

FunctionKey = tuple[str, int]  # (absolute source file, declaration line)


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    column: int

    @property
    def position(self) -> tuple[int, int]:
        return (self.line, self.column)


@dataclass(frozen=True)
class Frame:
    """One level of a frame chain: a source function and the location inside it."""

    function: FunctionKey | None
    location: Location


@dataclass
class Instruction:
    address: int
    size: int
    mnemonic: str
    operands: str
    frames: tuple[Frame, ...] = ()
    detail: Any = None  # the capstone instruction, for operand analysis

    @property
    def location(self) -> Location | None:
        return self.frames[-1].location if self.frames else None


@dataclass
class Block:
    start: int
    instructions: list[Instruction]
    successors: list[int] = field(default_factory=list)
    exits: bool = False  # returns, tail-calls or jumps somewhere unknown

    @property
    def end(self) -> int:
        last = self.instructions[-1]
        return last.address + last.size


@dataclass
class Call:
    block: int
    address: int
    target: str  # symbol name, or "" for an indirect call
    frames: tuple[Frame, ...]


@dataclass
class BinaryFunction:
    name: str
    low: int
    high: int
    key: FunctionKey | None
    blocks: dict[int, Block]
    calls: list[Call]
    warnings: list[str] = field(default_factory=list)

    @property
    def entry(self) -> int:
        return self.low

    def instructions(self) -> Iterator[Instruction]:
        for start in sorted(self.blocks):
            yield from self.blocks[start].instructions


@dataclass
class _InlineRange:
    low: int
    high: int
    depth: int
    function: FunctionKey | None
    call: Location


class DebugInfo:
    """Line table and inline tree of one ELF file, queried by address."""

    def __init__(self, dwarf):
        self.rows: list[tuple[int, Location | None]] = []  # sorted by address
        self.inlines: list[_InlineRange] = []
        self.subprograms: dict[int, FunctionKey] = {}  # low_pc -> declaration
        for unit in dwarf.iter_CUs():
            self._read_unit(dwarf, unit)
        self.rows.sort(key=lambda row: row[0])
        self._row_addresses = [row[0] for row in self.rows]
        self.inlines.sort(key=lambda r: (r.low, r.depth))

    # --- reading -----------------------------------------------------------------------
    def _read_unit(self, dwarf, unit) -> None:
        top = unit.get_top_DIE()
        comp_dir = _text(top.attributes.get("DW_AT_comp_dir")) or ""
        program = dwarf.line_program_for_CU(unit)
        if program is None:
            return
        files = self._file_table(program, comp_dir)
        for entry in program.get_entries():
            state = entry.state
            if state is None:
                continue
            if state.end_sequence:
                self.rows.append((state.address, None))
                continue
            name = files.get(state.file)
            if state.line == 0 or name is None:
                self.rows.append((state.address, None))
            else:
                self.rows.append((state.address, Location(name, state.line, state.column)))
        self._read_dies(top, files, depth=0)

    @staticmethod
    def _file_table(program, comp_dir: str) -> dict[int, str]:
        version = program.header["version"]
        directories = [_text(d) or "" for d in program.header["include_directory"]]
        table: dict[int, str] = {}
        for index, entry in enumerate(program.header["file_entry"]):
            name = _text(entry.name) or ""
            if version >= 5:
                directory = (
                    directories[entry.dir_index] if entry.dir_index < len(directories) else ""
                )
                number = index
            else:
                directory = comp_dir if entry.dir_index == 0 else directories[entry.dir_index - 1]
                number = index + 1
            path = name if os.path.isabs(name) else os.path.join(comp_dir, directory or "", name)
            table[number] = os.path.realpath(path)
        return table

    def _read_dies(self, die, files: dict[int, str], depth: int) -> None:
        for child in die.iter_children():
            tag = child.tag
            if tag == "DW_TAG_subprogram":
                ranges = _ranges(child)
                key = _declaration(child, files)
                for low, _high in ranges:
                    if key is not None:
                        self.subprograms[low] = key
                self._read_dies(child, files, depth)
            elif tag == "DW_TAG_inlined_subroutine":
                key = _declaration(child, files)
                attrs = child.attributes
                call_file = (
                    files.get(attrs["DW_AT_call_file"].value)
                    if "DW_AT_call_file" in attrs
                    else None
                )
                call = Location(
                    call_file or "",
                    attrs["DW_AT_call_line"].value if "DW_AT_call_line" in attrs else 0,
                    attrs["DW_AT_call_column"].value if "DW_AT_call_column" in attrs else 0,
                )
                for low, high in _ranges(child):
                    self.inlines.append(_InlineRange(low, high, depth, key, call))
                self._read_dies(child, files, depth + 1)
            elif tag in (
                "DW_TAG_lexical_block",
                "DW_TAG_namespace",
                "DW_TAG_class_type",
                "DW_TAG_structure_type",
            ):
                self._read_dies(child, files, depth)

    # --- queries -----------------------------------------------------------------------
    def location(self, address: int) -> Location | None:
        index = bisect.bisect_right(self._row_addresses, address) - 1
        return self.rows[index][1] if index >= 0 else None

    def frames(self, address: int, function: FunctionKey | None) -> tuple[Frame, ...]:
        """Outermost (the concrete function) to innermost (the last inlined callee)."""
        chain = sorted(
            (r for r in self.inlines if r.low <= address < r.high), key=lambda r: r.depth
        )
        line = self.location(address)
        if line is None:
            return ()
        frames: list[Frame] = []
        owner = function
        for inline in chain:
            frames.append(Frame(owner, inline.call))
            owner = inline.function
        frames.append(Frame(owner, line))
        return tuple(frames)


def _text(value) -> str | None:
    if value is None:
        return None
    raw = getattr(value, "value", value)
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def _ranges(die) -> list[tuple[int, int]]:
    """Address ranges of a DIE: low/high pc or a range list (DWARF 4 and 5)."""
    attrs = die.attributes
    if "DW_AT_low_pc" in attrs and "DW_AT_high_pc" in attrs:
        low = attrs["DW_AT_low_pc"].value
        high = attrs["DW_AT_high_pc"]
        end = high.value if high.form == "DW_FORM_addr" else low + high.value
        return [(low, end)]
    if "DW_AT_ranges" not in attrs:
        return []
    lists = die.dwarfinfo.range_lists()
    if lists is None:
        return []
    base = die.cu.get_top_DIE().attributes.get("DW_AT_low_pc")
    base_address = base.value if base else 0
    ranges = []
    for entry in lists.get_range_list_at_offset(attrs["DW_AT_ranges"].value, cu=die.cu):
        if hasattr(entry, "begin_offset"):
            absolute = getattr(entry, "is_absolute", False)
            offset = 0 if absolute else base_address
            ranges.append((offset + entry.begin_offset, offset + entry.end_offset))
        elif hasattr(entry, "base_address"):
            base_address = entry.base_address
    return ranges


def _declaration(die, files: dict[int, str]) -> FunctionKey | None:
    """(file, line) of the function's declaration, following origin/specification links."""
    seen = 0
    while die is not None and seen < 4:
        attrs = die.attributes
        if "DW_AT_decl_line" in attrs and "DW_AT_decl_file" in attrs:
            name = files.get(attrs["DW_AT_decl_file"].value)
            if name is not None:
                return (name, attrs["DW_AT_decl_line"].value)
        link = attrs.get("DW_AT_abstract_origin") or attrs.get("DW_AT_specification")
        die = die.get_DIE_from_attribute(link.name) if link is not None else None
        seen += 1
    return None


DAMAGED = (
    struct.error,
    AttributeError,
    TypeError,
    KeyError,
    IndexError,
    ValueError,
    AssertionError,
    UnicodeDecodeError,
    OverflowError,
    RecursionError,
    MemoryError,
)
"""What pyelftools and capstone raise, beside their own errors, on a truncated or altered
ELF file (23 of 40 damaged binaries stopped with one of them): section sizes, offsets,
types and DWARF forms are read from the file and trusted (a ``.symtab`` whose type was
flipped is a plain section without symbols: AttributeError)."""


def load_binary(path: str | Path) -> tuple[list[BinaryFunction], list[str]]:
    """Decode every function that has debug information into basic blocks; a damaged file
    is an :class:`InputError` naming it, whatever part of it is damaged."""
    exceptions = optional_module("elftools.common.exceptions", "perfcast static needs pyelftools")
    path = Path(path)
    if not path.is_file():
        raise InputError("binary not found", path=path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the binary: {exc.strerror}", path=path) from None
    try:  # parsed from memory: a seek the file's offsets send out of range is a ValueError
        return _load_binary(path, io.BytesIO(data))
    except (exceptions.ELFError, exceptions.DWARFError, *DAMAGED) as exc:
        reason = f"{type(exc).__name__}: {exc}"[:200]
        raise InputError(
            f"a damaged ELF file: its contents contradict its own headers ({reason}); "
            "compile the binary again (with -g)",
            path=path,
        ) from None


def _load_binary(path: Path, handle: io.BytesIO) -> tuple[list[BinaryFunction], list[str]]:
    ELFFile = optional_module("elftools.elf.elffile", "perfcast static needs pyelftools").ELFFile
    capstone = optional_module("capstone", "perfcast static needs capstone")
    with handle:
        try:
            elf = ELFFile(handle)
        except Exception as exc:  # pyelftools raises its own ELFError and struct errors
            raise InputError(f"not an ELF file ({exc})", path=path) from exc
        if elf["e_machine"] != "EM_X86_64":
            raise InputError(
                f"only x86-64 binaries are supported (this one is {elf['e_machine']})", path=path
            )
        if not elf.has_dwarf_info() or elf.get_section_by_name(".debug_line") is None:
            raise InputError(
                "has no DWARF debug information: rebuild it with -g (the optimisation "
                "level stays as it is)",
                path=path,
            )
        debug = DebugInfo(elf.get_dwarf_info())
        symbols = _function_symbols(elf)
        text = elf.get_section_by_name(".text")
        if text is None:
            raise InputError("has no .text section", path=path)
        code, base = text.data(), text["sh_addr"]
    disassembler = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    disassembler.detail = True
    by_address = {address: name for name, (address, _size) in symbols.items()}
    functions, warnings = [], []
    for name, (address, size) in sorted(symbols.items(), key=lambda item: item[1][0]):
        if not base <= address < base + len(code) or address not in debug.subprograms:
            continue
        key = debug.subprograms[address]
        chunk = code[address - base : address - base + size]
        instructions = [
            Instruction(
                i.address,
                i.size,
                i.mnemonic,
                i.op_str,
                debug.frames(i.address, key),
                i,
            )
            for i in disassembler.disasm(chunk, address)
        ]
        if not instructions:
            continue
        function = _basic_blocks(
            name, address, address + size, key, instructions, by_address, capstone
        )
        functions.append(function)
        warnings.extend(function.warnings)
    if not functions:
        raise InputError("no function has debug information: rebuild with -g", path=path)
    return functions, warnings


def _function_symbols(elf) -> dict[str, tuple[int, int]]:
    symbols: dict[str, tuple[int, int]] = {}
    table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
    if table is None:
        return symbols
    for symbol in table.iter_symbols():
        if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_size"] > 0:
            symbols.setdefault(symbol.name, (symbol["st_value"], symbol["st_size"]))
    return symbols


_UNCONDITIONAL = frozenset({"jmp"})
_STOPS = frozenset({"ud2", "hlt"})


def _jump_target(instruction, capstone) -> int | None:
    operands = instruction.operands
    if len(operands) == 1 and operands[0].type == capstone.x86.X86_OP_IMM:
        return int(operands[0].imm)
    return None


def _basic_blocks(name, low, high, key, instructions, symbols, capstone) -> BinaryFunction:
    """Split at jump targets and after control transfers; calls do not end a block."""
    leaders = {low}
    warnings = []
    for ins in instructions:
        groups = set(ins.detail.groups)
        if (
            capstone.CS_GRP_JUMP in groups
            or capstone.CS_GRP_RET in groups
            or ins.mnemonic in _STOPS
        ):
            leaders.add(ins.address + ins.size)
            target = _jump_target(ins.detail, capstone)
            if target is not None and low <= target < high:
                leaders.add(target)
    blocks: dict[int, Block] = {}
    current: Block | None = None
    for ins in instructions:
        if ins.address in leaders or current is None:
            current = Block(ins.address, [])
            blocks[ins.address] = current
        current.instructions.append(ins)
    calls: list[Call] = []
    for start, block in blocks.items():
        last = block.instructions[-1]
        groups = set(last.detail.groups)
        for ins in block.instructions:
            if capstone.CS_GRP_CALL in set(ins.detail.groups):
                target = _jump_target(ins.detail, capstone)
                calls.append(
                    Call(start, ins.address, symbols.get(target, "") if target else "", ins.frames)
                )
        fallthrough = last.address + last.size
        if capstone.CS_GRP_RET in groups or last.mnemonic in _STOPS:
            block.exits = True
        elif capstone.CS_GRP_JUMP in groups:
            target = _jump_target(last.detail, capstone)
            if target is None:
                block.exits = True
                warnings.append(f"{name}: indirect jump at {last.address:#x} (treated as exit)")
            elif low <= target < high:
                block.successors.append(target)
            else:
                block.exits = True  # tail call
                calls.append(Call(start, last.address, symbols.get(target, ""), last.frames))
            if last.mnemonic not in _UNCONDITIONAL and fallthrough in blocks:
                block.successors.append(fallthrough)
        elif fallthrough in blocks:
            block.successors.append(fallthrough)
        else:
            block.exits = True
    reachable, stack = set(), [low]
    while stack:
        start = stack.pop()
        if start in reachable or start not in blocks:
            continue
        reachable.add(start)
        stack.extend(blocks[start].successors)
    # Alignment padding after a jump is never executed: drop it from the graph.
    blocks = {s: b for s, b in blocks.items() if s in reachable}
    calls = [c for c in calls if c.block in reachable]
    return BinaryFunction(name, low, high, key, blocks, calls, warnings)
