"""Artificial noise, the patterns of ``noise-resilient-priors.txt`` V-A6.

The paper perturbs a measurement ``y`` as ``y~ = y + eta`` with eta drawn from one of four
distributions, "clipped to [0, 1]", at an intensity (2 %, 5 %, ... 75 %). We read that as
a relative perturbation::

    eta = intensity * y * u,    u in [0, 1] drawn from the pattern

so 5 % uniform noise moves every value up by 0 to 5 % of itself. The unit samples ``u``:

============  ===============================================================================
pattern       ``u``
============  ===============================================================================
uniform       ``U(a=0, b=1)``
normal        standard normal truncated to ``[0, 1]`` (``mu=0, sigma=1, a=0, b=1``): density
              proportional to ``exp(-u^2/2)`` on [0, 1], mean 0.4599
poisson       ``Poisson(lambda=1000) / 1000`` clipped to [0, 1]: mean 1 with sd 0.032, so
              about half of the samples are exactly 1 and the rest lie in [0.9, 1); this
              pattern is close to a constant offset of ``intensity``
exponential   ``Exponential(rate lambda=1000) * 1000 = Exponential(1)`` clipped to [0, 1]:
              63 % of the samples spread over [0, 1) with density ``e^-u``, 37 % are 1
============  ===============================================================================

The paper restricts itself to additive noise (``eta >= 0``) because subtractive noise
barely matters for its measurements. ``symmetric=True`` gives each sample a random sign
instead (``eta = intensity * y * s * u``, ``s = +-1``): uniform noise then perturbs
values within ``+-intensity`` (the convention of Extra-P's own synthetic studies), normal
becomes a standard normal truncated to [-1, 1].

The paper perturbs "randomly selected" measurements; ``share`` is the probability that a
measurement is perturbed at all (1 = all of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.experiment import VALUE, Experiment

POISSON_LAMBDA = 1000.0
"""Rate of the scaled Poisson pattern; samples are divided by the same scale (V-A6)."""
EXPONENTIAL_LAMBDA = 1000.0
"""Rate of the scaled exponential pattern; samples are multiplied by the same scale (V-A6)."""


class NoisePattern(StrEnum):
    UNIFORM = "uniform"
    NORMAL = "normal"
    POISSON = "poisson"
    EXPONENTIAL = "exponential"


def unit_samples(
    pattern: NoisePattern | str, size: int | tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """``size`` samples of the pattern's distribution on [0, 1] (see the module docstring)."""
    pattern = _pattern(pattern)
    if pattern is NoisePattern.UNIFORM:
        return rng.uniform(0.0, 1.0, size)
    if pattern is NoisePattern.NORMAL:
        return _truncated_standard_normal(size, rng)
    if pattern is NoisePattern.POISSON:
        return np.clip(rng.poisson(POISSON_LAMBDA, size) / POISSON_LAMBDA, 0.0, 1.0)
    scale = 1.0 / EXPONENTIAL_LAMBDA  # numpy's scale is 1/rate
    return np.clip(rng.exponential(scale, size) * EXPONENTIAL_LAMBDA, 0.0, 1.0)


def _truncated_standard_normal(size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """N(0, 1) restricted to [0, 1]: |N(0, 1)| rejected above 1 (acceptance 68 %)."""
    count = int(np.prod(size))
    out = np.empty(0)
    while len(out) < count:
        draw = np.abs(rng.standard_normal(2 * (count - len(out)) + 16))
        out = np.concatenate([out, draw[draw <= 1.0]])
    return out[:count].reshape(size)


@dataclass(frozen=True)
class Noise:
    """A noise pattern at an intensity: ``Noise("uniform", 0.05)`` is 5 % uniform noise."""

    pattern: NoisePattern | str = NoisePattern.UNIFORM
    intensity: float = 0.05
    symmetric: bool = False
    share: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", _pattern(self.pattern))
        if not self.intensity >= 0:
            raise InputError(f"noise intensity must be >= 0 (0.05 = 5 %), got {self.intensity}")
        if self.symmetric and self.intensity >= 1:
            raise InputError(
                f"symmetric noise of {self.intensity:.0%} could make values negative; "
                "use an intensity below 1"
            )
        if not 0 <= self.share <= 1:
            raise InputError(f"noise share must lie in [0, 1], got {self.share}")

    def perturbation(self, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Relative perturbations ``eta / y``: multiply values by ``1 + perturbation``."""
        eta = self.intensity * unit_samples(self.pattern, size, rng)
        if self.symmetric:
            eta = eta * rng.choice((-1.0, 1.0), size)
        if self.share < 1:
            eta = np.where(rng.uniform(size=size) < self.share, eta, 0.0)
        return eta

    def apply(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy copy of ``values`` (any shape)."""
        values = np.asarray(values, dtype=float)
        return values * (1.0 + self.perturbation(values.shape, rng))

    def apply_to(self, experiment: Experiment, rng: np.random.Generator) -> Experiment:
        """Noisy copy of an experiment; every repetition is perturbed independently."""
        data = experiment.data.copy()
        data[VALUE] = self.apply(data[VALUE].to_numpy(), rng)
        return Experiment(
            experiment.parameters,
            data,
            experiment.metrics.values(),
            source=experiment.source,
        )

    def label(self) -> str:
        sign = "+-" if self.symmetric else "+"
        return f"{self.pattern} {sign}{self.intensity:.0%}"


def _pattern(pattern: NoisePattern | str) -> NoisePattern:
    try:
        return NoisePattern(pattern)
    except ValueError:
        choices = ", ".join(p.value for p in NoisePattern)
        raise InputError(f"unknown noise pattern {pattern!r}; choose one of {choices}") from None
