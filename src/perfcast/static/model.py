"""The static model: per source function, instruction counts per category as formulas.

Built from the mapped binary functions: each instruction adds its block's count to its
category, credited to the innermost source function it came from (an inlined callee gets
its own model function, called by the function it was inlined into). Calls that stayed
calls become ``handle_function_call`` compositions with the callee's model; calls into
code without source (libraries) are listed with their counts and are not modeled.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from perfcast.errors import InputError, PerfcastError
from perfcast.static import expressions as ex
from perfcast.static.arch import Architecture
from perfcast.static.arithmetic import parse_formula
from perfcast.static.disassembly import BinaryFunction, load_binary
from perfcast.static.domains import Combination, Counter, Instance, Symbol
from perfcast.static.formulas import Poly, polynomial, python_expression
from perfcast.static.mapping import FunctionMapper, MappedFunction, _find_call
from perfcast.static.source import SourceFunction, parse_source

_PARAMS = re.compile(r"^\[([^\]]*)\]")


@dataclass
class CallSite:
    callee: str  # model function name
    arguments: dict[str, str]  # callee parameter -> Python expression over caller parameters
    count: Combination
    line: int


@dataclass
class FunctionModel:
    """Counts of one model function (a source function, or one inlined copy of it)."""

    name: str
    source_name: str
    location: str
    binary_symbol: str
    symbols: dict[str, Symbol]
    categories: dict[str, Combination]
    calls: list[CallSite] = field(default_factory=list)
    external: dict[str, Combination] = field(default_factory=dict)
    own_parameters: dict[str, str] = field(default_factory=dict)  # name -> description
    derived: dict[str, str] = field(default_factory=dict)
    parameters: list[str] = field(default_factory=list)  # the signature (after composition)
    inlined_into: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class StaticModel:
    source: str
    binary: str
    architecture: Architecture
    functions: list[FunctionModel]
    warnings: list[str]
    values: dict[str, object] = field(default_factory=dict, repr=False)  # symbol text -> pwqp
    skipped: dict[str, str] = field(default_factory=dict)  # source function -> why

    def function(self, name: str) -> FunctionModel:
        for function in self.functions:
            if function.name == name:
                return function
        raise KeyError(name)


MODULE_NAMES = frozenset(
    {"F", "defaultdict", "handle_function_call", "evaluate", "local", "FUNCTIONS", "PARAMETERS"}
    | {"CATEGORIES", "FLOATING_POINT", "MACHINE", "SOURCE_NAMES"}
)
"""Names the generated module defines or uses itself: a C function called ``sum`` or
``evaluate`` must not replace the builtin or helper the module's own code calls."""


def _identifier(text: str) -> str:
    name = re.sub(r"\W+", "_", text).strip("_") or "function"
    taken = keyword.iskeyword(name) or name in MODULE_NAMES or hasattr(builtins, name)
    return name + "_" if taken else name


def build_model(
    source: str | Path,
    binary: str | Path,
    architecture: Architecture,
    flags: tuple[str, ...] = (),
    only: str | None = None,
) -> StaticModel:
    """Analyse ``source`` and its compiled ``binary`` into a :class:`StaticModel`.

    ``only`` names one source function (``Domain::x`` or ``x``): it and the functions it
    calls are analysed, nothing else. A function the analysis fails on is left out and
    listed in ``StaticModel.skipped`` with the reason, so one construct it cannot handle
    does not cost the model of every other function in the file.
    """
    program = parse_source(source, flags)
    functions, warnings = load_binary(binary)
    warnings = list(program.warnings) + warnings
    table = program.by_key()
    candidates = [f for f in functions if f.key and table.get(f.key) is not None]
    if only is not None:
        candidates = _with_callees(candidates, only, table, source, program.included)
    mapped: list[MappedFunction] = []
    skipped: dict[str, str] = {}
    for function in candidates:
        source_function = table[function.key]  # type: ignore[index]
        try:
            mapped_function = FunctionMapper(program, function, source_function).solve()
        except Exception as exc:  # any failure skips this function only
            skipped[source_function.name] = _reason(exc)
            continue
        mapped.append(mapped_function)
        warnings.extend(mapped_function.warnings)
    if not mapped:
        reasons = "; ".join(f"{name}: {why}" for name, why in skipped.items())
        raise InputError(
            f"no function of {binary} could be modeled from this source file"
            + (f" ({reasons})" if reasons else " (was it compiled from it, with -g?)"),
            path=source,
        )
    names = _model_names(mapped)
    sources = {item.binary.name: item.source for item in mapped}
    builder = _ModelBuilder(architecture, names, sources)
    models: list[FunctionModel] = []
    counter = Counter()
    values = {}
    for item in mapped:
        try:
            built = builder.function_models(item)
            counted = {
                symbol.text + ("#entries" if symbol.project else ""): counter.count(symbol)
                for model in built
                for symbol in model.symbols.values()
            }
        except Exception as exc:  # any failure skips this function only
            skipped[item.source.name] = _reason(exc)
            continue
        models.extend(built)
        values.update(counted)
    _resolve_signatures(models)
    result = StaticModel(str(source), str(binary), architecture, models, warnings, values)
    result.skipped = skipped
    return result


def _reason(exc: Exception) -> str:
    """Why a function was skipped, in one line: the message, typed unless it is ours."""
    text = " ".join(str(exc).split()) or "no message"
    return text if isinstance(exc, PerfcastError) else f"{type(exc).__name__}: {text}"


def _with_callees(
    candidates: list[BinaryFunction],
    only: str,
    table: dict[tuple[str, int], SourceFunction],
    source: str | Path,
    included: Mapping[str, tuple[str, int]],
) -> list[BinaryFunction]:
    """The binary functions of source function ``only`` and, transitively, those they call
    (a model function composes its callees' models, so they must be there too)."""

    def named(function: BinaryFunction) -> bool:
        name = table[function.key].name  # type: ignore[index]
        return only in (name, name.rsplit("::", 1)[-1])

    by_symbol = {f.name: f for f in candidates}
    wanted = [f for f in candidates if named(f)]
    if not wanted:
        elsewhere = [(n, at) for n, at in included.items() if only in (n, n.rsplit("::", 1)[-1])]
        if elsewhere:
            name, (file, line) = elsewhere[0]
            raise InputError(
                f"--function {only}: {name} is defined in {file}:{line}, a header this file "
                "includes; perfcast static models the functions the given file defines, with "
                "their code where the compiler put it (a template of a header is usually "
                "inlined into its callers): model the function of this file that calls it",
                path=source,
            )
        known = sorted({table[f.key].name for f in candidates})  # type: ignore[index]
        raise InputError(
            f"--function {only}: no such function in the binary's code from this file; "
            f"it has {', '.join(known[:20])}" + (" ..." if len(known) > 20 else ""),
            path=source,
        )
    chosen: dict[str, BinaryFunction] = {}
    while wanted:
        function = wanted.pop()
        if function.name in chosen:
            continue
        chosen[function.name] = function
        wanted.extend(by_symbol[c.target] for c in function.calls if c.target in by_symbol)
    return [f for f in candidates if f.name in chosen]


def _model_names(mapped: list[MappedFunction]) -> dict[str, str]:
    """Binary symbol -> Python name: the source name, disambiguated for overloads/templates."""
    names: dict[str, str] = {}
    used: dict[str, int] = {}
    for item in mapped:
        base = _identifier(item.source.name.replace("::", "_"))
        count = used.get(base, 0)
        used[base] = count + 1
        names[item.binary.name] = base if count == 0 else f"{base}_{count + 1}"
    return names


class _ModelBuilder:
    def __init__(
        self,
        architecture: Architecture,
        names: dict[str, str],
        sources: dict[str, SourceFunction],
    ):
        self.architecture = architecture
        self.names = names
        self.sources = sources  # binary symbol -> source function

    def function_models(self, item: MappedFunction) -> list[FunctionModel]:
        root_name = self.names[item.binary.name]
        location = f"{Path(item.source.file).name}:{item.source.line}"
        owners: dict[int, FunctionModel] = {}

        def owner(instance: Instance | None) -> FunctionModel:
            instance = instance or item.root
            if id(instance) not in owners:
                if instance is item.root:
                    name, into = root_name, None
                    where = location
                else:
                    call_line = instance.tag.lstrip("_")
                    callee = _identifier(instance.function.name.replace("::", "_"))
                    name = f"{callee}__inlined_L{call_line}"
                    into = root_name
                    where = f"{Path(instance.function.file).name}:{instance.function.line}"
                owners[id(instance)] = FunctionModel(
                    name=name,
                    source_name=instance.function.name,
                    location=where,
                    binary_symbol=item.binary.name,
                    symbols={},
                    categories={},
                    inlined_into=into,
                )
            return owners[id(instance)]

        root_model = owner(item.root)
        root_model.warnings = list(item.warnings)
        symbol_by_name = {name: symbol for symbol, name in item.symbols.symbols.items()}
        for start, block in item.binary.blocks.items():
            count = item.block_counts.get(start, {})
            if not count:
                continue
            for instruction in block.instructions:
                place = item.place_of(instruction)
                target = owner(place.instance if place else None)
                category = self.architecture.categorize(instruction.mnemonic)
                _add(target.categories.setdefault(category, {}), count)
                for name in count:
                    target.symbols[name] = symbol_by_name[name]
        for call in item.binary.calls:
            count = item.block_counts.get(call.block, {})
            place = item.places.get(call.address)
            target = owner(place.instance if place else None)
            for name in count:
                target.symbols[name] = symbol_by_name[name]
            callee_name = self.names.get(call.target)
            if callee_name is None:
                label = call.target or "<indirect>"
                _add(target.external.setdefault(label, {}), count)
                continue
            arguments = self._arguments(item, call, place, target)
            line = call.frames[-1].location.line if call.frames else 0
            target.calls.append(CallSite(callee_name, arguments, count, line))
        for instance_id, model in owners.items():
            if model is root_model:
                continue
            del instance_id
            root_model.calls.append(CallSite(model.name, {}, {item.symbols.one: Fraction(1)}, 0))
            root_model.symbols[item.symbols.one] = symbol_by_name[item.symbols.one]
        parameters = item.symbols.parameters
        for model in owners.values():
            used = set()
            for symbol in model.symbols.values():
                used |= _symbol_parameters(symbol)
            model.own_parameters.update(
                {p: parameters.free[p] for p in used if p in parameters.free}
            )
            model.derived = {p: parameters.derived[p] for p in used if p in parameters.derived}
            for expression in model.derived.values():
                for name in re.findall(r"[A-Za-z_]\w*", expression):
                    if name in parameters.free:
                        model.own_parameters.setdefault(name, parameters.free[name])
        for model in owners.values():
            # These texts become code of the generated module: only whitelisted arithmetic
            # on parameter names may get there (parse_formula raises otherwise).
            for expression in model.derived.values():
                parse_formula(expression)
            for site in model.calls:
                for argument in site.arguments.values():
                    parse_formula(argument)
        return list(owners.values())

    def _arguments(
        self, item: MappedFunction, call, place, caller: FunctionModel
    ) -> dict[str, str]:
        """Callee formal parameter -> Python expression in the caller's parameters.

        An argument that varies inside the caller's loops becomes a caller parameter
        named after it and the call's line (``n_42``), as in the paper."""
        callee_source = self.sources.get(call.target)
        location = call.frames[-1].location if call.frames else None
        if place is None or callee_source is None or location is None:
            return {}
        found = _find_call(place, callee_source, location)
        if found is None:
            return {}
        domain = item.domains.domain(place)
        arguments: dict[str, str] = {}
        for formal, actual in zip(
            callee_source.parameters, found.construct.arguments, strict=False
        ):
            if formal not in callee_source.integer_parameters:
                continue
            translated = ex.substitute(actual, domain.mapping)
            if ex.names(translated) & set(domain.dims) or isinstance(translated, ex.Opaque):
                name = ex.sanitize(f"{formal}_{location.line}")
                caller.own_parameters.setdefault(
                    name, f"argument {formal} of the call at line {location.line}"
                )
                arguments[ex.sanitize(formal)] = name
                continue
            for used in ex.names(translated):
                caller.own_parameters.setdefault(ex.sanitize(used), f"variable {used}")
            # keyed like the callee's parameters: a C name that is a Python keyword
            # (``from``) is ``from_`` there
            arguments[ex.sanitize(formal)] = ex.to_python(translated)
        return arguments


def _add(target: Combination, count: Combination) -> None:
    for name, value in count.items():
        new = target.get(name, Fraction(0)) + value
        if new:
            target[name] = new
        else:
            target.pop(name, None)


def _symbol_parameters(symbol: Symbol) -> set[str]:
    match = _PARAMS.match(symbol.text)
    names = {p.strip() for p in match.group(1).split(",") if p.strip()} if match else set()
    return names | set(symbol.multipliers)


def _resolve_signatures(models: list[FunctionModel]) -> None:
    """Signature = own parameters + parameters of callees not bound by the call (fixpoint)."""
    by_name = {m.name: m for m in models}
    for model in models:
        model.parameters = sorted(set(model.own_parameters) - set(model.derived))
    changed = True
    while changed:
        changed = False
        for model in models:
            needed = set(model.parameters)
            for call in model.calls:
                callee = by_name.get(call.callee)
                if callee is None:
                    continue
                for parameter in callee.parameters:
                    if parameter not in call.arguments:
                        needed.add(parameter)
                    else:
                        needed |= {
                            n for n in re.findall(r"[A-Za-z_]\w*", call.arguments[parameter])
                        }
            needed -= set(model.derived)
            if needed != set(model.parameters):
                model.parameters = sorted(needed)
                changed = True


def category_totals(model: StaticModel, function: FunctionModel) -> dict[str, Poly]:
    """Own counts per category as PMNF-like polynomials (calls not included)."""
    totals: dict[str, Poly] = {}
    for category, combination in function.categories.items():
        totals[category] = combination_polynomial(model, function, combination)
    return totals


def combination_polynomial(
    model: StaticModel, function: FunctionModel, combination: Combination
) -> Poly:
    total = Poly()
    for name, coefficient in combination.items():
        symbol = function.symbols[name]
        value = model.values[symbol.text + ("#entries" if symbol.project else "")]
        poly = polynomial(value)
        for multiplier in symbol.multipliers:
            poly = poly * Poly.variable(multiplier)
        total = total + poly.scale(coefficient)
    return total


def symbol_python(model: StaticModel, symbol: Symbol) -> str:
    value = model.values[symbol.text + ("#entries" if symbol.project else "")]
    expression = python_expression(value)
    for multiplier in symbol.multipliers:
        expression = f"{expression} * {multiplier}"
    return expression
