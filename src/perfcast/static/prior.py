"""Static count formulas as modeler priors: a fixed term structure, coefficients fitted.

The static model knows *which* terms an instruction count has (``n^3``, ``n^2``, ``n``);
time is not instructions, but for compute-bound code it follows the same terms, so the
modeler only has to fit their coefficients, like with the effort counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor
from perfcast.modeling.prior import Prior
from perfcast.static.formulas import Poly

SOURCE = "static"


def prior_from_formula(formula: Poly, rename: Mapping[str, str] | None = None) -> Prior:
    """A fixed-structure prior with one term per non-constant monomial of ``formula``.

    Args:
        formula: a count formula of the static model (its terms' coefficients are dropped).
        rename: model parameter -> experiment parameter (``{"n": "size"}``); parameters
            not named keep their name.
    """
    rename = dict(rename or {})
    shapes = []
    for monomial in formula.terms:
        if not monomial:
            continue
        shapes.append(
            tuple(
                sorted(Factor(rename.get(name, name), Fraction(power)) for name, power in monomial)
            )
        )
    if not shapes:
        return Prior.constant(SOURCE)
    return Prior.fixed(SOURCE, sorted(set(shapes)))


def prior_from_summary(
    summary: Mapping,
    function: str,
    metric: str = "instructions",
    rename: Mapping[str, str] | None = None,
) -> Prior:
    """Prior for one model function from a model's JSON summary.

    ``metric`` is ``instructions``, ``fp_instructions`` or a category name."""
    for entry in summary.get("functions", []):
        if entry["name"] == function:
            break
    else:
        names = sorted(e["name"] for e in summary.get("functions", []))
        raise InputError(f"static model has no function {function!r}; it has {names}")
    if metric in ("instructions", "fp_instructions"):
        text = entry[metric]
    elif metric in entry["counts"]:
        text = entry["counts"][metric]
    else:
        raise InputError(
            f"static model of {function} has no count {metric!r}; use instructions, "
            f"fp_instructions or one of {sorted(entry['counts'])}"
        )
    return prior_from_formula(parse_formula(text), rename)


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
            if not name.isidentifier():
                raise InputError(f"cannot read the static formula {text!r} (at {factor!r})")
            monomial[name] = monomial.get(name, 0) + int(power or 1)
        total = total + Poly({tuple(sorted(monomial.items())): coefficient})
    return total


def _is_number(text: str) -> bool:
    try:
        Fraction(text)
    except ValueError:
        return False
    return True
