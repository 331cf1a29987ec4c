"""Priors: what program analysis knows about a call path before any time is measured.

A prior only ever *restricts* the hypothesis space of the modeler; with no prior the search
is the classic black-box one. Sources: taint analysis (which parameters can matter and which
may multiply), effort counters and the static model (a fixed term structure whose
coefficients alone are fitted to time), communication laws (also a fixed structure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor

TermShape = tuple[Factor, ...]


@dataclass(frozen=True)
class Prior:
    """A restriction of the hypothesis space for one call path.

    Attributes:
        source: who produced it ("taint", "effort", "static", ...); recorded on the model.
        parameters: parameters that may appear at all; ``None`` allows every parameter.
            An empty set means the call path provably does not depend on any parameter,
            so it gets a constant model.
        multiplicative: groups of parameters that may appear in one product term
            (nested loops); parameters in different groups only add. ``None`` allows
            every product.
        structure: a fixed set of term shapes; the modeler fits only their coefficients
            (plus a constant). Takes precedence over the other two restrictions.
    """

    source: str
    parameters: frozenset[str] | None = None
    multiplicative: tuple[frozenset[str], ...] | None = None
    structure: tuple[TermShape, ...] | None = None

    @classmethod
    def constant(cls, source: str) -> Prior:
        return cls(source, parameters=frozenset())

    @classmethod
    def fixed(cls, source: str, structure: Iterable[Iterable[Factor]]) -> Prior:
        return cls(source, structure=tuple(tuple(shape) for shape in structure))

    def allows_parameter(self, parameter: str) -> bool:
        return self.parameters is None or parameter in self.parameters

    def allows_product(self, parameters: Iterable[str]) -> bool:
        """May these parameters share one term? Singletons always may (if allowed at all)."""
        group = frozenset(parameters)
        if not all(self.allows_parameter(p) for p in group):
            return False
        if len(group) <= 1 or self.multiplicative is None:
            return True
        return any(group <= allowed for allowed in self.multiplicative)

    def check(self, parameters: Iterable[str], where: str) -> None:
        """Reject priors naming parameters the experiment does not have."""
        known = set(parameters)
        named: set[str] = set(self.parameters or ())
        for group in self.multiplicative or ():
            named |= group
        for shape in self.structure or ():
            named |= {f.parameter for f in shape}
        unknown = sorted(named - known)
        if unknown:
            raise InputError(
                f"{self.source} prior for {where} names parameters {unknown} that the "
                f"experiment does not have (it has {sorted(known)})"
            )

    def describe(self) -> str:
        if self.structure is not None:
            shapes = [" * ".join(f.text() for f in s) or "1" for s in self.structure]
            return f"{self.source}: fixed terms [{', '.join(shapes)}]"
        if self.parameters is not None and not self.parameters:
            return f"{self.source}: constant"
        parts = []
        if self.parameters is not None:
            parts.append("parameters {" + ", ".join(sorted(self.parameters)) + "}")
        if self.multiplicative is not None:
            groups = [" x ".join(sorted(g)) for g in self.multiplicative]
            parts.append("products {" + "; ".join(groups) + "}")
        return f"{self.source}: " + ", ".join(parts or ["no restriction"])


Priors = Mapping[str, Prior]
"""Priors keyed by call path; call paths without an entry are modeled black-box."""
