"""One composition of priors from several sources, per (call path, metric).

Sources say different kinds of things. Taint analysis says which parameters the code *may*
depend on and which may multiply: a restriction that fixes nothing. Effort counters and the
static model say which terms the work *has*: a fixed structure whose coefficients alone
are fitted. The composition, per (call path, metric):

1. **Restrictions intersect.** A hypothesis must be allowed by every restricting source:
   the allowed parameters intersect, and a product is allowed where every source allows
   it (the groups intersect pairwise).
2. **A fixed structure wins over a restriction.** Exact counts are a stronger statement
   than "may depend on"; intersecting the two would silently drop terms the counts
   measured whenever the analysis misses a dependency. Where the structure's evidence
   uses a parameter a restriction rules out, that is a finding (stage ``"priors"``,
   kind ``"ruled-out"``) naming both sources, the parameter and the winner. (The other
   direction -- a restriction allows a parameter the structure does not use -- is no
   finding: a restriction bounds what *may* matter.)
3. **Two fixed structures that differ** are a finding (kind ``"fixed-conflict"``): the
   source registered first wins (:func:`perfcast.priors.registry.precedence`) -- measured
   counts of this very program run (effort) before counts derived from source code
   (static: inlining, annotations and paths not taken can make it differ).

Nothing is resolved silently: every rule that drops a source's statement says so. An
advisory source (:attr:`~perfcast.modeling.prior.DerivedPriors.advisory`: taint analysis
that only checks) takes part in the findings of rule 2 but constrains nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from perfcast.modeling.findings import Finding
from perfcast.modeling.prior import DerivedPriors, Prior, PriorKey
from perfcast.priors.registry import precedence

RULED_OUT, FIXED_CONFLICT = "ruled-out", "fixed-conflict"
STAGE = "priors"


@dataclass(frozen=True)
class Composition:
    """What :func:`compose` returns.

    Attributes:
        priors: (call path, metric) -> the composed prior.
        findings: the conflicts between sources (stage ``"priors"``).
        ruled_out: call path -> parameters a winning fixed structure's evidence uses that
            a restricting source rules out (rule 2): the work was measured to depend on
            them, so a later check must not take that dependence for contention.
    """

    priors: Mapping[PriorKey, Prior] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    ruled_out: Mapping[str, frozenset[str]] = field(default_factory=dict)


def compose(derived: Sequence[DerivedPriors]) -> Composition:
    """The composed prior of every (call path, metric) any source constrains
    (module docstring), with the findings of the rules that overrode a source."""
    order = precedence()
    ranked = sorted(
        derived, key=lambda d: order.index(d.source) if d.source in order else len(order)
    )
    keys = dict.fromkeys(key for d in ranked for key in d.priors)
    composed: dict[PriorKey, Prior] = {}
    findings: list[Finding] = []
    ruled_out: dict[str, set[str]] = {}
    for key in keys:
        given = [(d, d.priors[key]) for d in ranked if key in d.priors]
        fixed = [(d, p) for d, p in given if p.structure is not None and not d.advisory]
        restrictions = [p for _, p in given if p.structure is None]
        binding = [p for d, p in given if p.structure is None and not d.advisory]
        if not fixed:
            if binding:
                composed[key] = intersect(binding)
            continue
        (winner, prior), *others = fixed
        composed[key] = prior
        for loser, other in others:
            if _shapes(other) != _shapes(prior):
                findings.append(_fixed_conflict(key, winner, prior, loser, other))
        evidence = winner.evidence_of(key)
        for restriction in restrictions:
            excluded = sorted(p for p in evidence if not restriction.allows_parameter(p))
            ruled_out.setdefault(key[0], set()).update(excluded)
            findings += [_ruled_out(key, winner, restriction, p) for p in excluded]
    return Composition(
        composed,
        tuple(findings),
        {callpath: frozenset(ps) for callpath, ps in ruled_out.items() if ps},
    )


def intersect(priors: Iterable[Prior]) -> Prior:
    """The restriction every one of ``priors`` (restrictions, no fixed structure) allows:
    parameters in all of them, products within a group of each."""
    priors = list(priors)
    parameters: frozenset[str] | None = None
    products: tuple[frozenset[str], ...] | None = None
    for prior in priors:
        if prior.parameters is not None:
            parameters = prior.parameters if parameters is None else parameters & prior.parameters
        if prior.multiplicative is not None:
            products = (
                prior.multiplicative
                if products is None
                else _maximal(a & b for a in products for b in prior.multiplicative)
            )
    source = "+".join(dict.fromkeys(p.source for p in priors))
    return Prior(source, parameters=parameters, multiplicative=products)


def _maximal(groups: Iterable[frozenset[str]]) -> tuple[frozenset[str], ...]:
    """The groups of two or more parameters not contained in another (a product of one
    parameter is always allowed)."""
    kept = [g for g in dict.fromkeys(groups) if len(g) > 1]
    return tuple(g for g in kept if not any(g < other for other in kept))


def _shapes(prior: Prior) -> frozenset[tuple]:
    return frozenset(tuple(sorted(shape)) for shape in prior.structure or ())


def _fixed_conflict(
    key: PriorKey, winner: DerivedPriors, prior: Prior, loser: DerivedPriors, other: Prior
) -> Finding:
    return Finding(
        STAGE,
        key[0],
        key[1],
        FIXED_CONFLICT,
        f"{winner.source} and {loser.source} priors fix different terms: "
        f"{prior.describe()} against {other.describe()}; the {winner.source} prior wins "
        f"(precedence {' > '.join(precedence())})",
        {"winner": winner.source, "loser": loser.source},
    )


def _ruled_out(key: PriorKey, winner: DerivedPriors, restriction: Prior, parameter: str) -> Finding:
    causes = f" (possible causes: {'; '.join(winner.caveats)})" if winner.caveats else ""
    return Finding(
        STAGE,
        key[0],
        key[1],
        RULED_OUT,
        f"{winner.source} and {restriction.source} priors disagree: the {winner.source} "
        f"evidence depends on {parameter}, which the {restriction.source} prior rules "
        f"out{causes}; the {winner.source} prior is kept: a fixed structure wins over a "
        "restriction",
        {"winner": winner.source, "parameter": parameter},
    )


__all__ = ["FIXED_CONFLICT", "RULED_OUT", "Composition", "compose", "intersect"]
