"""The performance model normal form (PMNF) and fitted models.

    f(x) = c_0 + sum_k c_k * prod_l x_l^(i_kl) * log2(x_l)^(j_kl)

Exponents are exact :class:`~fractions.Fraction` values so that ``n^(1/3)`` survives a JSON
round trip and two models can be compared term by term without float fuzz.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.points import format_point

ArrayLike = np.ndarray | Sequence[float] | float


def fraction(value: Fraction | int | float | str) -> Fraction:
    """Exact exponent from ``"1/3"``, ``0.25``, ``2`` or a Fraction (floats snapped to /12)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        return Fraction(value).limit_denominator(12)
    return Fraction(value)


def format_fraction(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


@dataclass(frozen=True, order=True)
class Factor:
    """``parameter^exponent * log2(parameter)^log_exponent``."""

    parameter: str
    exponent: Fraction
    log_exponent: int = 0

    def evaluate(self, values: np.ndarray) -> np.ndarray:
        """The factor at ``values``; ``inf`` where it exceeds a float (the callers say so
        with the point: a warning in NumPy's own words would name none)."""
        out = np.ones_like(values, dtype=float)
        with np.errstate(over="ignore"):
            if self.exponent:
                out = out * np.power(values, float(self.exponent))
            if self.log_exponent:
                out = out * np.power(np.log2(values), self.log_exponent)
        return out

    @property
    def needs_log(self) -> bool:
        return self.log_exponent != 0

    def domain(self) -> str | None:
        """Where the factor is defined, as text (``p > 0``); None: for every number.

        A logarithm needs a positive value, a fractional power a non-negative one (NumPy
        gives nan for ``(-8)^(1/3)``), a negative power a non-zero one."""
        fractional = self.exponent.denominator != 1
        if self.log_exponent or (fractional and self.exponent < 0):
            return f"{self.parameter} > 0"
        if fractional:
            return f"{self.parameter} >= 0"
        if self.exponent < 0:
            return f"{self.parameter} != 0"
        return None

    def defined_at(self, values: np.ndarray) -> np.ndarray:
        """Per value, whether it lies in :meth:`domain`."""
        fractional = self.exponent.denominator != 1
        if self.log_exponent or (fractional and self.exponent < 0):
            return values > 0
        if fractional:
            return values >= 0
        if self.exponent < 0:
            return values != 0
        return np.ones_like(values, dtype=bool)

    def text(self) -> str:
        parts = []
        if self.exponent:
            e = format_fraction(self.exponent)
            parts.append(self.parameter if e == "1" else f"{self.parameter}^({e})")
        if self.log_exponent:
            log = f"log2({self.parameter})"
            parts.append(log if self.log_exponent == 1 else f"{log}^({self.log_exponent})")
        return " * ".join(parts)

    def python(self) -> str:
        parts = []
        if self.exponent:
            parts.append(f"{self.parameter}**({format_fraction(self.exponent)})")
        if self.log_exponent:
            parts.append(f"log2({self.parameter})**{self.log_exponent}")
        return " * ".join(parts)

    def latex(self) -> str:
        parts = []
        if self.exponent:
            e = self.exponent
            exp = (
                str(e.numerator)
                if e.denominator == 1
                else rf"\frac{{{e.numerator}}}{{{e.denominator}}}"
            )
            parts.append(self.parameter if e == 1 else f"{self.parameter}^{{{exp}}}")
        if self.log_exponent:
            log = rf"\log_2{{{self.parameter}}}"
            parts.append(log if self.log_exponent == 1 else f"{log}^{{{self.log_exponent}}}")
        return r" \cdot ".join(parts)

    def to_json(self) -> dict:
        return {
            "parameter": self.parameter,
            "exponent": format_fraction(self.exponent),
            "log_exponent": self.log_exponent,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Factor:
        return cls(
            str(data["parameter"]), fraction(data["exponent"]), int(data.get("log_exponent", 0))
        )


@dataclass(frozen=True)
class Term:
    """A coefficient times a product of factors over distinct parameters."""

    coefficient: float
    factors: tuple[Factor, ...]

    @property
    def shape(self) -> tuple[Factor, ...]:
        """The term without its coefficient: what the hypothesis search chooses."""
        return self.factors

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(f.parameter for f in self.factors)

    def basis(self, point: Mapping[str, np.ndarray]) -> np.ndarray:
        out: np.ndarray | float = 1.0
        for factor in self.factors:
            out = out * factor.evaluate(np.asarray(point[factor.parameter], dtype=float))
        return np.asarray(out, dtype=float)

    def to_json(self) -> dict:
        return {"coefficient": self.coefficient, "factors": [f.to_json() for f in self.factors]}

    @classmethod
    def from_json(cls, data: Mapping) -> Term:
        return cls(float(data["coefficient"]), tuple(Factor.from_json(f) for f in data["factors"]))


@dataclass(frozen=True)
class FitStatistics:
    """How well a model fits its (aggregated) training points."""

    rss: float = float("nan")
    smape: float = float("nan")
    adjusted_r2: float = float("nan")
    cv_error: float = float("nan")
    points: int = 0

    def to_json(self) -> dict:
        return {
            "rss": self.rss,
            "smape": self.smape,
            "adjusted_r2": self.adjusted_r2,
            "cv_error": self.cv_error,
            "points": self.points,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> FitStatistics:
        return cls(
            **{
                k: data[k]
                for k in ("rss", "smape", "adjusted_r2", "cv_error", "points")
                if k in data
            }
        )


@dataclass(frozen=True)
class Alternative:
    """Another fit of the same measurements that the model selection could not tell from
    the selected one (:data:`perfcast.modeling.search.RIVAL_TOLERANCE`): its constant and
    terms, enough to evaluate it where a prediction interval is wanted."""

    constant: float
    terms: tuple[Term, ...]

    def to_json(self) -> dict:
        return {"constant": self.constant, "terms": [t.to_json() for t in self.terms]}

    @classmethod
    def from_json(cls, data: Mapping) -> Alternative:
        return cls(float(data["constant"]), tuple(Term.from_json(t) for t in data["terms"]))


@dataclass(frozen=True)
class Uncertainty:
    """What a fit knows of its own uncertainty: enough for a prediction interval anywhere
    (:func:`perfcast.modeling.intervals.prediction_interval`), stored with the model because
    the measurements behind it are not.

    Coefficients are kept in the fit's scaled coordinates: each column of the weighted
    design divided by its norm, ``scales`` (constant first, then the terms in order). Their
    covariance is then a small, well-conditioned matrix of relative numbers, where the raw
    coefficients' covariance spans as many orders of magnitude as ``p^3`` and ``log2(p)``.
    ``covariance`` already includes the fit's noise estimate (``s^2 (X'X)^-1`` of the scaled
    design), which rests on ``dof`` degrees of freedom; ``noise`` is the relative standard
    deviation of one new repetition around the model, resting on ``noise_dof``.
    ``alternatives`` are the other fits the selection could not tell from this one."""

    scales: tuple[float, ...]
    covariance: tuple[tuple[float, ...], ...]
    dof: float
    noise: float
    noise_dof: float
    alternatives: tuple[Alternative, ...] = ()

    def to_json(self) -> dict:
        return {
            "scales": list(self.scales),
            "covariance": [list(row) for row in self.covariance],
            "dof": self.dof,
            "noise": self.noise,
            "noise_dof": self.noise_dof,
            "alternatives": [a.to_json() for a in self.alternatives],
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Uncertainty:
        return cls(
            scales=tuple(float(v) for v in data["scales"]),
            covariance=tuple(tuple(float(v) for v in row) for row in data["covariance"]),
            dof=float(data["dof"]),
            noise=float(data["noise"]),
            noise_dof=float(data["noise_dof"]),
            alternatives=tuple(Alternative.from_json(a) for a in data.get("alternatives", [])),
        )


@dataclass(frozen=True)
class Model:
    """A fitted PMNF function for one (call path, metric): a fact, never changed.

    ``prior`` describes the prior it was fitted under, ``warnings`` what the fit itself
    found (too few repetitions, a poor fit, a constant model for noise). What later stages
    say about it is a :class:`~perfcast.modeling.findings.Finding` in its model set, so a
    stage run twice cannot repeat itself and every statement names who made it."""

    callpath: str
    metric: str
    constant: float
    terms: tuple[Term, ...] = ()
    statistics: FitStatistics = field(default_factory=FitStatistics)
    prior: str | None = None
    warnings: tuple[str, ...] = ()
    uncertainty: Uncertainty | None = None
    """The fit's uncertainty (None: unknown, e.g. a model read from an Extra-P file or
    written before perfcast stored it); one scale per coefficient, the constant's first."""

    def __post_init__(self) -> None:
        if self.uncertainty is not None and len(self.uncertainty.scales) != len(self.terms) + 1:
            raise ValueError(
                f"uncertainty of {len(self.uncertainty.scales)} coefficients for a model of "
                f"{len(self.terms) + 1}"
            )

    @property
    def parameters(self) -> tuple[str, ...]:
        """Parameters that appear in the model, in order of first appearance."""
        seen: dict[str, None] = {}
        for term in self.terms:
            for p in term.parameters:
                seen.setdefault(p)
        return tuple(seen)

    def is_constant(self) -> bool:
        return not self.terms

    def evaluate(self, point: Mapping[str, ArrayLike]) -> np.ndarray:
        """Vectorised: each parameter maps to a scalar or an array of equal length.

        The result has the shape of the whole point, also where the model uses none of its
        parameters: a constant model evaluated at three points gives three values, so that
        predictions of a model set line up. A point outside the model's domain (``log2(0)``,
        a negative value under a fractional power) or a value beyond floating point raises
        an :class:`InputError` naming parameter and value, rather than returning nan or inf.
        """
        arrays = {k: np.asarray(v, dtype=float) for k, v in point.items()}
        missing = [p for p in self.parameters if p not in arrays]
        if missing:
            raise KeyError(f"model of {self.callpath!r} needs values for {missing}")
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
        except ValueError:
            lengths = {k: a.size for k, a in arrays.items()}
            raise InputError(f"parameter values of different lengths {lengths}") from None
        self._check_domain(arrays)
        out = np.asarray(self.constant, dtype=float)
        with np.errstate(all="ignore"):  # overflow becomes inf, reported below
            for term in self.terms:
                out = out + term.coefficient * term.basis(arrays)
        out = np.array(np.broadcast_to(out, shape))
        infinite = ~np.isfinite(out)
        if infinite.any():
            index = np.unravel_index(int(np.argmax(infinite)), shape)
            where = format_point(
                (p, np.broadcast_to(arrays[p], shape)[index]) for p in self.parameters
            )
            raise InputError(
                f"the model of {self.callpath!r} ({self.metric}) gives {out[index]} at "
                f"{where or 'every point'}: beyond what a floating-point number holds; "
                "predict at smaller values"
            )
        return out

    def _check_domain(self, arrays: Mapping[str, np.ndarray]) -> None:
        for term in self.terms:
            for factor in term.factors:
                values = arrays[factor.parameter]
                outside = ~factor.defined_at(values)
                if outside.any():
                    value = values.reshape(-1)[int(np.argmax(outside.reshape(-1)))]
                    raise InputError(
                        f"{format_point({factor.parameter: value})} is outside the domain of the "
                        f"model of {self.callpath!r} ({self.metric}): its factor {factor.text()} "
                        f"needs {factor.domain()}"
                    )

    def leading_term(self) -> Term | None:
        """The term that dominates growth: largest exponent, then log exponent, per parameter
        set. Used to compare a model's asymptotics with the truth."""
        if not self.terms:
            return None
        return max(
            self.terms,
            key=lambda t: sorted(((f.exponent, f.log_exponent) for f in t.factors), reverse=True),
        )

    def leading_exponents(self) -> dict[str, tuple[Fraction, int]]:
        """Per parameter, the largest (exponent, log exponent) over all terms; (0, 0) if absent."""
        result: dict[str, tuple[Fraction, int]] = {}
        for term in self.terms:
            for f in term.factors:
                result[f.parameter] = max(
                    result.get(f.parameter, (Fraction(0), 0)), (f.exponent, f.log_exponent)
                )
        return result

    def text(self, precision: int = 4) -> str:
        parts = [f"{self.constant:.{precision}g}"]
        for term in self.terms:
            sign = "-" if term.coefficient < 0 else "+"
            body = " * ".join(f.text() for f in term.factors)
            parts.append(f"{sign} {abs(term.coefficient):.{precision}g} * {body}")
        return " ".join(parts)

    def python(self) -> str:
        """A Python expression; ``log2`` comes from ``math`` or ``numpy``."""
        parts = [repr(float(self.constant))]
        for term in self.terms:
            parts.append(
                f"{float(term.coefficient)!r} * " + " * ".join(f.python() for f in term.factors)
            )
        return " + ".join(parts)

    def latex(self, precision: int = 4) -> str:
        parts = [_latex_number(self.constant, precision)]
        for term in self.terms:
            sign = "-" if term.coefficient < 0 else "+"
            body = r" \cdot ".join(f.latex() for f in term.factors)
            parts.append(f"{sign} {_latex_number(abs(term.coefficient), precision)} \\cdot {body}")
        return " ".join(parts)

    # -- notebooks (perfcast.modeling.views) ------------------------------------------------

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def _repr_html_(self) -> str:
        from perfcast.modeling.views import model_html

        return model_html(self)

    def plot(self, parameter: str, **options: Any) -> Any:
        """Draw the model along ``parameter`` with its prediction interval
        (:func:`perfcast.modeling.views.plot_model`; needs matplotlib)."""
        from perfcast.modeling.views import plot_model

        return plot_model(self, parameter, **options)

    def to_json(self) -> dict:
        data = {
            "callpath": self.callpath,
            "metric": self.metric,
            "constant": self.constant,
            "terms": [t.to_json() for t in self.terms],
            "statistics": self.statistics.to_json(),
            "prior": self.prior,
            "warnings": list(self.warnings),
            "formula": self.text(),
        }
        if self.uncertainty is not None:
            data["uncertainty"] = self.uncertainty.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> Model:
        return cls(
            callpath=str(data["callpath"]),
            metric=str(data["metric"]),
            constant=float(data["constant"]),
            terms=tuple(Term.from_json(t) for t in data.get("terms", [])),
            statistics=FitStatistics.from_json(data.get("statistics", {})),
            prior=data.get("prior"),
            warnings=tuple(data.get("warnings", [])),
            uncertainty=(
                Uncertainty.from_json(data["uncertainty"]) if data.get("uncertainty") else None
            ),
        )


def _latex_number(value: float, precision: int) -> str:
    text = f"{value:.{precision}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return rf"{mantissa} \times 10^{{{int(exponent)}}}"
    return text
