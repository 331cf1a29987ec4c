"""The static model's JSON summary as a typed contract: what ``perfcast static ... -o
model.py`` writes beside the module (``model.json``) and the prior stage reads.

The summary is handed from the static analysis to modeling, often by another person on
another machine, so it is validated once, on read (:func:`read_static_summary`): every
formula is parsed there, and a damaged summary is refused naming the file and the key
(``functions[2].counts["fp_add"]``) instead of failing while priors are derived.

**Versions.** The ``format`` key names the format and its version
(``perfcast-static-summary/1``). Summaries written before the key existed are version 1;
a reader refuses a version it does not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.inputs import JsonChecker, read_json
from perfcast.static.formulas import Poly

FORMAT_NAME = "perfcast-static-summary"
VERSION = 1
FORMAT = f"{FORMAT_NAME}/{VERSION}"

TOTALS = ("instructions", "fp_instructions")
"""The counts of every function besides its per-category ``counts``."""

_WRITE_ONE = "write one with `perfcast static SOURCE --binary BINARY -o model.py` (and model.json)"


@dataclass(frozen=True)
class StaticFunction:
    """One function of the static model: its instruction counts as formulas of its
    parameters, callees included."""

    name: str
    instructions: str
    """All instructions, as written (``6 * n^3 + 0.5 * n^2 + 3``)."""
    fp_instructions: str
    counts: Mapping[str, str] = field(default_factory=dict)
    """Per instruction category (``fp_add``, ``load``, ...)."""
    location: str | None = None
    """``file.c:12``."""
    parameters: Mapping[str, str] = field(default_factory=dict)
    """Each parameter and where it comes from (an argument, or passed on to a callee)."""
    warnings: tuple[str, ...] = ()

    def formula(self, count: str = "instructions") -> Poly:
        """The formula of ``count``: ``instructions``, ``fp_instructions`` or a category."""
        if count in TOTALS:
            return parse_formula(getattr(self, count))
        if count in self.counts:
            return parse_formula(self.counts[count])
        raise InputError(
            f"static model of {self.name} has no count {count!r}; use instructions, "
            f"fp_instructions or one of {sorted(self.counts)}"
        )


@dataclass(frozen=True)
class StaticSummary:
    """The static model of a program: per function, its counts as formulas."""

    functions: Mapping[str, StaticFunction]
    """Keyed by name."""
    source: str | None = None
    binary: str | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)
    """Functions left out of the model, with the reason."""
    warnings: tuple[str, ...] = ()

    def function(self, name: str) -> StaticFunction:
        """The function ``name``; InputError listing the functions the model has."""
        if name not in self.functions:
            raise InputError(
                f"static model has no function {name!r}; it has {sorted(self.functions)}"
            )
        return self.functions[name]

    @classmethod
    def from_json(cls, data: Any, path: str | Path | None = None) -> StaticSummary:
        """A summary from its parsed JSON; InputError naming ``path`` and the key at fault."""
        return _Reader(path).summary(data)


def read_static_summary(path: str | Path) -> StaticSummary:
    """The static summary at ``path``: the JSON file, or the one beside a generated ``.py``."""
    path = Path(path)
    if path.suffix == ".py":
        path = path.with_suffix(".json")
    data = read_json(path, "static model summary", _WRITE_ONE)
    return StaticSummary.from_json(data, path)


def parse_formula(text: str) -> Poly:
    """Read back a formula as written in the summary (``2 * n^3 + 0.5 * n * m + 4``)."""
    total = Poly()
    for raw in text.replace("- ", "+ -").split("+"):
        term = raw.strip()
        if not term:
            continue
        coefficient = Fraction(1)
        monomial: dict[str, int] = {}
        for factor in term.split("*"):
            factor = factor.strip()
            if factor.startswith("-") and not _is_number(factor):
                coefficient = -coefficient
                factor = factor[1:].strip()
            if _is_number(factor):
                coefficient *= Fraction(factor)
                continue
            name, _, power = factor.partition("^")
            if not name.isidentifier() or not (power or "1").isdigit():
                raise InputError(f"cannot read the static formula {text!r} (at {factor!r})")
            monomial[name] = monomial.get(name, 0) + int(power or 1)
        total = total + Poly({tuple(sorted(monomial.items())): coefficient})
    return total


def _is_number(text: str) -> bool:
    try:
        Fraction(text)
    except (ValueError, ZeroDivisionError):
        return False
    return True


class _Reader(JsonChecker):
    """JSON to :class:`StaticSummary`, each error naming the key (``functions[0].counts``)."""

    def __init__(self, path: str | Path | None):
        super().__init__(path, _WRITE_ONE)

    def optional_text(self, table: dict[str, Any], key: str, where: str) -> str | None:
        value = table.get(key)
        return None if value is None else self.text(value, f"{where}.{key}")

    def names(self, value: Any, where: str) -> dict[str, str]:
        table = self.table(value, where)
        return {key: self.text(v, f"{where}[{json.dumps(key)}]") for key, v in table.items()}

    def formula(self, value: Any, where: str) -> str:
        text = self.text(value, where)
        try:
            parse_formula(text)
        except InputError as exc:
            raise InputError(f"{where}: {exc.reason}; {_WRITE_ONE}", path=self.path) from None
        return text

    def summary(self, data: Any) -> StaticSummary:
        if not isinstance(data, dict) or "functions" not in data:
            raise InputError(
                f"not a static model summary (no 'functions' list); {_WRITE_ONE}", path=self.path
            )
        found = data.get("format", FORMAT)  # summaries without the key are version 1
        name, _, number = str(found).rpartition("/")
        if name != FORMAT_NAME or not number.isdigit():
            raise InputError(
                f"not a static model summary (format {found!r}, expected {FORMAT!r}); {_WRITE_ONE}",
                path=self.path,
            )
        if int(number) > VERSION:
            raise InputError(
                f"static summary format version {number} is newer than this perfcast reads "
                f"(up to {VERSION}); update perfcast or write the summary again with this one",
                path=self.path,
            )
        functions = data["functions"]
        if not isinstance(functions, list):
            raise self.fail("functions", "a list of functions")
        entries = [self.function(entry, f"functions[{i}]") for i, entry in enumerate(functions)]
        skipped = data.get("skipped", [])
        if not isinstance(skipped, list):
            raise self.fail("skipped", "a list of skipped functions")
        return StaticSummary(
            functions={entry.name: entry for entry in entries},
            source=self.optional_text(data, "source", "the summary"),
            binary=self.optional_text(data, "binary", "the summary"),
            skipped=dict(self.skipped(entry, f"skipped[{i}]") for i, entry in enumerate(skipped)),
            warnings=self.texts(data.get("warnings", []), "warnings"),
        )

    def function(self, entry: Any, where: str) -> StaticFunction:
        entry = self.table(entry, where)
        for key in ("name", *TOTALS):
            self.required(entry, key, where)
        return StaticFunction(
            name=self.text(entry["name"], f"{where}.name"),
            instructions=self.formula(entry["instructions"], f"{where}.instructions"),
            fp_instructions=self.formula(entry["fp_instructions"], f"{where}.fp_instructions"),
            counts={
                category: self.formula(text, f"{where}.counts[{json.dumps(category)}]")
                for category, text in self.table(entry.get("counts", {}), f"{where}.counts").items()
            },
            location=self.optional_text(entry, "location", where),
            parameters=self.names(entry.get("parameters", {}), f"{where}.parameters"),
            warnings=self.texts(entry.get("warnings", []), f"{where}.warnings"),
        )

    def skipped(self, entry: Any, where: str) -> tuple[str, str]:
        entry = self.table(entry, where)
        return (
            self.text(entry.get("function"), f"{where}.function"),
            self.text(entry.get("reason"), f"{where}.reason"),
        )
