"""Priors: what program analysis knows about a call path before any time is measured.

A prior only ever *restricts* the hypothesis space of the modeler; with no prior the search
is the classic black-box one. Sources: taint analysis (which parameters can matter and which
may multiply), effort counters and the static model (a fixed term structure whose
coefficients alone are fitted to time), communication laws (also a fixed structure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perfcast.errors import InputError
from perfcast.modeling.findings import Finding
from perfcast.modeling.pmnf import Factor, Model

if TYPE_CHECKING:  # the model set and the experiment only pass through check and report
    from perfcast.experiment.experiment import Experiment
    from perfcast.modeling.modelset import ModelSet

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
        counts: where the structure comes from counted work (effort), each shape's
            coefficient in the count model, in ``structure``'s order: how much work each
            term is, which bounds what its time may cost per unit of work.
    """

    source: str
    parameters: frozenset[str] | None = None
    multiplicative: tuple[frozenset[str], ...] | None = None
    structure: tuple[TermShape, ...] | None = None
    counts: tuple[float, ...] | None = field(default=None, compare=False)

    @classmethod
    def constant(cls, source: str) -> Prior:
        return cls(source, parameters=frozenset())

    @classmethod
    def fixed(
        cls,
        source: str,
        structure: Iterable[Iterable[Factor]],
        counts: Iterable[float] | None = None,
    ) -> Prior:
        return cls(
            source,
            structure=tuple(tuple(shape) for shape in structure),
            counts=None if counts is None else tuple(float(c) for c in counts),
        )

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


PriorKey = tuple[str, str]
"""(call path, metric): a prior constrains the models of the metrics its evidence speaks
for (effort counts and static counts: time; taint: every measured metric)."""


@dataclass(frozen=True)
class DerivedPriors:
    """What one prior source derived from an experiment: the input of the composition
    (:func:`perfcast.priors.compose`).

    Attributes:
        source: the source's name ("taint", "effort", "static").
        priors: (call path, metric) -> prior; keys without an entry are unconstrained.
        findings: what the source found while deriving.
        notes: what the user must know about the derivation (call paths it could not
            match, inputs it lacks), printed once, not attached to models.
        models: exact models the source made of its own inputs (effort counts), reported
            as they are and never refitted.
        unreachable: call path -> parameters its code provably cannot read (taint): a
            free model using only these beyond the prior measured contention, not work.
        evidence: (call path, metric) -> the parameters the source's evidence depends on,
            where narrower than its prior (a communication law adds a ``log2(p)`` latency
            the byte counts never measured).
        caveats: why this source's evidence may use a parameter another source rules out,
            for the finding that says so.
        exact_metrics: metrics this source knows exactly (effort counts and their maxima
            over ranks): no other prior restricts them, no contention is suspected in them.
        conflict_label: how the warning of a conflict of this source's prior with the
            measurements starts (default ``<source> prior conflicts with the measurements``).
        advisory: the priors are compared with the other sources' but never fitted
            (``--taint-mode check``: flags only).

    A source that judges the final models or reports them its own way derives a subclass
    that overrides :meth:`check` or :meth:`report`: what they need is what the derivation
    found, so it travels with it, and neither can be called before the derivation ran.
    """

    source: str
    priors: Mapping[PriorKey, Prior] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    models: tuple[Model, ...] = ()
    unreachable: Mapping[str, frozenset[str]] = field(default_factory=dict)
    evidence: Mapping[PriorKey, frozenset[str]] = field(default_factory=dict)
    caveats: tuple[str, ...] = ()
    exact_metrics: frozenset[str] = frozenset()
    conflict_label: str | None = None
    advisory: bool = False

    def evidence_of(self, key: PriorKey) -> frozenset[str]:
        """The parameters the evidence behind ``key``'s prior depends on."""
        if key in self.evidence:
            return self.evidence[key]
        prior = self.priors[key]
        if prior.structure is not None:
            return frozenset(f.parameter for shape in prior.structure for f in shape)
        return prior.parameters if prior.parameters is not None else frozenset()

    def check(
        self,
        models: ModelSet,
        free: ModelSet,
        experiment: Experiment,
        proven: Mapping[str, frozenset[str]],
    ) -> list[Finding]:
        """Findings of this source on the final ``models`` (none by default); ``free`` are
        the black-box fits of the measured metrics, ``proven`` the parameters exact evidence
        showed despite a restriction (:attr:`perfcast.priors.Composition.ruled_out`)."""
        return []

    def report(self, models: ModelSet, free: ModelSet) -> str | None:
        """This source's own report of the final ``models`` beside the black-box ``free``
        ones, or ``None``: the priors stage's report then shows its models (and the
        modeling workflow its notes, which an own report shows itself)."""
        return None
