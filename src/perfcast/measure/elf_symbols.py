"""Which functions a compiled file holds, under every name a filter may use for them.

``perfcast build --filter`` asks for functions by name, but an optimising compiler inlines
small and ``static inline`` functions into their callers, and what is inlined everywhere
is no function of the binary any more: XRay has no sled for it, the runtime cannot measure
it, and its time counts in its caller. This module reads the ELF files themselves (no
binutils needed beyond ``c++filt`` for C++ names) so that the build can say so once, at the
link, and so that ``--keep-inlined`` can find the symbols to keep in each object file.

Names are matched as the runtime matches them (``runtime/perfcast_rt.c``): the symbol, its
demangled form, and the demangled form without its parameter list; an entry that names no
function so is matched by its qualified name (:func:`select`), which is how a template named
as the source spells it finds its instantiations.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from perfcast.clang_toolchain import demangle
from perfcast.errors import InputError

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_XRAY_SLED = struct.Struct("<qqBBB13x")
"""One entry of ``xray_instr_map`` (compiler-rt's XRaySledEntry): sled address, function
address, kind, always-instrument flag, version; from version 2 on both addresses are
relative to the field that holds them."""

SHT_SYMTAB, SHT_DYNAMIC, SHT_DYNSYM = 2, 6, 11
DT_NULL, DT_NEEDED = 0, 1
_DYNAMIC = struct.Struct("<qQ")
STT_FUNC = 2
SHN_UNDEF = 0
XRAY_MAP_SECTION = "xray_instr_map"


@dataclass(frozen=True)
class _Section:
    name: str
    kind: int
    address: int
    offset: int
    size: int
    link: int


@dataclass(frozen=True)
class FunctionSymbol:
    """A function defined in an ELF file: its symbol and address."""

    symbol: str
    address: int


class ElfFile:
    """The section headers and function symbols of a 64-bit little-endian ELF file."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read the compiled file: {exc.strerror}", path=path) from None
        if len(self.data) < _ELF_HEADER.size or self.data[:6] != b"\x7fELF\x02\x01":
            raise InputError("not a 64-bit little-endian ELF file", path=path)
        header = _ELF_HEADER.unpack_from(self.data)
        section_offset, count, names_index = header[6], header[12], header[13]
        try:
            raw = [
                _SECTION_HEADER.unpack_from(self.data, section_offset + i * _SECTION_HEADER.size)
                for i in range(count)
            ]
        except struct.error:
            raise InputError(
                "a truncated ELF file: its section headers are cut off", path=path
            ) from None
        names_offset = raw[names_index][4] if names_index < count else 0
        self.sections = [
            _Section(self._string(names_offset + r[0]), r[1], r[3], r[4], r[5], r[6]) for r in raw
        ]

    def _string(self, offset: int) -> str:
        end = self.data.find(b"\0", offset)
        return self.data[offset : end if end >= 0 else len(self.data)].decode(errors="replace")

    def functions(self) -> list[FunctionSymbol]:
        """Defined function symbols (the static symbol table, else the dynamic one)."""
        for kind in (SHT_SYMTAB, SHT_DYNSYM):
            table = next((s for s in self.sections if s.kind == kind), None)
            if table is not None:
                break
        else:
            return []
        strings = self.sections[table.link].offset
        found = []
        for offset in range(table.offset, table.offset + table.size, _SYMBOL.size):
            name, info, _other, section, value, _size = _SYMBOL.unpack_from(self.data, offset)
            if info & 0xF == STT_FUNC and section != SHN_UNDEF:
                found.append(FunctionSymbol(self._string(strings + name), value))
        return found

    def needed_libraries(self) -> list[str]:
        """The shared libraries the file names as needed (its ``DT_NEEDED`` entries)."""
        dynamic = next((s for s in self.sections if s.kind == SHT_DYNAMIC), None)
        if dynamic is None or dynamic.link >= len(self.sections):
            return []
        strings = self.sections[dynamic.link].offset
        needed = []
        end = min(dynamic.offset + dynamic.size, len(self.data))
        for offset in range(dynamic.offset, end - _DYNAMIC.size + 1, _DYNAMIC.size):
            tag, value = _DYNAMIC.unpack_from(self.data, offset)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                needed.append(self._string(strings + value))
        return needed

    def xray_function_addresses(self) -> set[int] | None:
        """Addresses of the functions with XRay sleds; None without an XRay map."""
        section = next((s for s in self.sections if s.name == XRAY_MAP_SECTION), None)
        if section is None:
            return None
        addresses = set()
        for index in range(section.size // _XRAY_SLED.size):
            offset = section.offset + index * _XRAY_SLED.size
            _sled, function, _kind, _always, version = _XRAY_SLED.unpack_from(self.data, offset)
            if version >= 2:  # relative to the function field's own address
                function += section.address + index * _XRAY_SLED.size + 8
            addresses.add(function & 0xFFFFFFFFFFFFFFFF)
        return addresses


def without_parameters(name: str) -> str | None:
    """``ns::f<int>(double) const`` -> ``ns::f<int>``, as the runtime shortens names."""
    close = name.rfind(")")
    if close < 0:
        return None
    level = 0
    for index in range(close, -1, -1):
        level += {")": 1, "(": -1}.get(name[index], 0)
        if level == 0:
            return name[:index] if index > 0 else None
    return None


def qualified_name(name: str) -> str | None:
    """``void ns::f<ns::V<double> >(double)`` -> ``ns::f``, as the runtime shortens names:
    without the parameter list, every template argument list and a template's return type;
    None for an operator spelt with ``<``, ``>`` or ``->`` (they are no argument list).

    Why: a taint profile names a function template as the source spells it
    (``miniFE::waxpby(typename VectorType::ScalarType, ...)``) and a program holds only its
    instantiations (``void miniFE::waxpby<miniFE::Vector<double, int, int> >(double, ...)``),
    which share nothing else; the qualified name is what both say.
    """
    at = name.find("operator")
    if at >= 0 and name[at + len("operator") :].lstrip()[:1] in ("<", ">", "-"):
        return None
    text = without_parameters(name) or name
    kept, depth = [], 0
    for character in text:
        if character == "<":
            depth += 1
        elif character == ">" and depth:
            depth -= 1
        elif depth == 0:
            kept.append(character)
    text, depth, start = "".join(kept).rstrip(), 0, 0
    for index, character in enumerate(text):  # a return type ends at the last top-level space
        depth += {"(": 1, ")": -1}.get(character, 0)
        if character == " " and depth == 0:
            start = index + 1
    return text[start:] or None


def _exact_names(symbols: Iterable[str], demangled: Mapping[str, str]) -> dict[str, set[str]]:
    """Every name a filter entry may give each symbol exactly: itself, demangled, and
    without the parameter list."""
    names = {}
    for symbol in symbols:
        shown = demangled.get(symbol, symbol)
        forms = {symbol, shown, without_parameters(shown)}
        names[symbol] = {form for form in forms if form}
    return names


def select(symbols: Iterable[str], wanted: Iterable[str]) -> tuple[set[str], set[str]]:
    """(the symbols a filter's entries select, the entries that select none), as the runtime
    selects: a symbol an entry names exactly (itself, demangled, without the parameter
    list); then, for every entry that names none, the symbols whose :func:`qualified_name`
    is the entry's. An entry that names one overload exactly keeps naming just that one; one
    spelled as the source spells a template (or a signature in another notation) takes
    every instantiation of the name. The symbols are demangled once, for both passes."""
    symbols = list(symbols)
    wanted = set(wanted)
    demangled = demangle(symbols)
    forms = _exact_names(symbols, demangled)
    chosen = {symbol for symbol, names in forms.items() if names & wanted}
    used = {name for symbol in chosen for name in forms[symbol] & wanted}
    fallback: dict[str, set[str]] = {}
    for entry in wanted - used:
        qualified = qualified_name(entry)
        if qualified is not None:
            fallback.setdefault(qualified, set()).add(entry)
    if fallback:
        for symbol in symbols:
            qualified = qualified_name(demangled.get(symbol, symbol))
            if qualified in fallback:
                chosen.add(symbol)
                used |= fallback[qualified]
    return chosen, wanted - used


def measurable_symbols(program: Path) -> list[str] | None:
    """The symbols of every function of ``program`` the runtime can measure (those with an
    XRay sled); None if the program has no XRay map (it was not linked by perfcast build)."""
    elf = ElfFile(program)
    try:
        addresses = elf.xray_function_addresses()
        if addresses is None:
            return None
        return [f.symbol for f in elf.functions() if f.address in addresses]
    except struct.error:
        raise InputError("a truncated ELF file: a section is cut off", path=program) from None


def symbols_named(object_file: Path, wanted: Iterable[str]) -> list[str]:
    """The function symbols defined in ``object_file`` that the entries of ``wanted``
    select (:func:`select`)."""
    try:
        symbols = {f.symbol for f in ElfFile(object_file).functions()}
    except struct.error:
        raise InputError("a truncated ELF file: a section is cut off", path=object_file) from None
    chosen, _ = select(sorted(symbols), wanted)
    return sorted(chosen)
