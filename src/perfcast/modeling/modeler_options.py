"""The options of :class:`~perfcast.modeling.modeler.PMNFModeler`, each declared once with
its prose: what it does and why its default (:mod:`perfcast.modeling.options` turns the
declarations into the constructor, its checks, ``get_params``/``set_params``, the class
docstring and the command-line flags).

:class:`ModelerOptions` is the modeler's configuration without its behaviour: the search
(:mod:`perfcast.modeling.search`) reads what it needs from it, and the modeler adds ``fit``.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

from perfcast.experiment.experiment import AGGREGATIONS
from perfcast.modeling.fitting import CRITERIA
from perfcast.modeling.options import OPTION, Estimator, Flag, OptionError, option
from perfcast.modeling.robust import MEDIAN_ESTIMATORS
from perfcast.modeling.space import SearchSpace

WEIGHTINGS = ("relative", "none")
"""``weighting``'s choices: relative residuals (multiplicative noise) or plain least squares."""

MAX_SHAPE_COMBINATIONS = 50_000
"""Combinations of ``terms`` shapes the per-parameter search may fit: it tries every
combination on every line, so their number bounds its time. Extra-P's default space gives
59 for one term, 1711 for two and 32509 for three (already tens of seconds per parameter);
``terms=4`` would be 455126, minutes to hours."""


@dataclass(eq=False)
class ModelerOptions(Estimator):
    """The options of the PMNF modeler (documented on
    :class:`~perfcast.modeling.modeler.PMNFModeler`, which adds ``fit``)."""

    space: SearchSpace = option(  # noqa: RUF009 (option() is a field specifier)
        default_factory=SearchSpace, doc="exponent sets of the search (Extra-P's defaults)."
    )
    _: KW_ONLY
    terms: int = option(
        1,
        minimum=1,
        doc="number of terms per parameter (``terms`` shapes summed; 1 = Extra-P's default); "
        "at most :data:`~perfcast.modeling.modeler_options.MAX_SHAPE_COMBINATIONS` "
        "combinations of that many shapes.",
        flag=Flag("--terms", type=int, help="terms per parameter (default {default})"),
    )
    criterion: str = option(
        "smape",
        choices=tuple(sorted(CRITERIA)),
        doc='``"smape"`` or ``"rss"`` of leave-one-out predictions.',
        flag=Flag("--criterion"),
    )
    aggregation: str = option(
        "median",
        choices=AGGREGATIONS,
        doc="how repetitions at a point are combined before fitting.",
        flag=Flag("--aggregate"),
    )
    median_estimator: str = option(
        "huber",
        choices=MEDIAN_ESTIMATORS,
        doc='how ``aggregation="median"`` estimates a point\'s central value. ``"huber"`` '
        "(default) is Huber's M-estimate with a scale pooled over all points of the call "
        "path (the median absolute relative deviation of the repetitions from their "
        "point's sample median): repetitions within ``HUBER_TUNING`` robust standard "
        "deviations count like in the mean, farther ones (spikes from other processes) are "
        "down-weighted. With five repetitions the mean's variance under well-behaved noise "
        "is the lowest, the sample median's about 2.2 times higher under uniform noise, and "
        "that variance is what confuses neighbouring exponents; the pooled scale is what "
        'lets five repetitions tell a spike from noise. ``"harrell-davis"`` is a '
        "Beta-weighted average of the sorted repetitions (Harrell & Davis, 1982; 6 % weight "
        "each on the smallest and largest of five, so a spike still shifts it), "
        '``"sample"`` the middle value.',
        flag=Flag(
            "--median-estimator",
            help="how --aggregate median estimates a point's centre: huber (default: starts "
            "at the sample median, counts calm repetitions fully and down-weights spikes), "
            "harrell-davis (Beta-weighted order statistics) or sample (the middle value)",
        ),
    )
    candidates: int = option(
        5,
        minimum=1,
        doc="most shapes kept per parameter for the multi-parameter combination.",
        flag=Flag("--candidates", type=int, help="shapes kept per parameter (default {default})"),
    )
    combinations: int = option(
        27,
        minimum=1,
        doc="most shape combinations refitted per structure: a structure over ``k`` "
        "parameters combines each one's best ``c`` candidates, ``c`` the largest with "
        "``c^k <= combinations`` (and ``c <= candidates``). A fixed budget rather than a "
        "fixed ``c``: two parameters can afford five candidates each (25 fits), three only "
        "three (27), and more candidates mostly help at high noise, where the true shape "
        "ranks lower.",
    )
    refine_structures: int = option(
        3, minimum=1, doc="structures refitted with every candidate combination."
    )
    finalists: int = option(
        1,
        minimum=1,
        doc="hypotheses per call path that pass screening (in-sample fit, generalised "
        "cross-validation) on to exact leave-one-out validation, besides the constant.",
    )
    parsimony: float = option(
        1.0,
        minimum=0,
        doc="hypotheses whose screening score exceeds the best one's by less than "
        "``parsimony`` standard errors of the residual sum of squares that pure noise leaves "
        "(estimated from the repetitions' pooled robust spread) count as equally good, and "
        "the one with the fewest terms is selected: the one-standard-error rule at the "
        "default 1. An extra term always fits some of the noise, and generalised "
        "cross-validation's penalty for it is small with few points per parameter. Among "
        "those with the fewest terms, ``shape_tolerance`` decides. ``0`` selects the "
        "best-screened hypothesis.",
    )
    shape_tolerance: float = option(
        0.25,
        minimum=0,
        doc="among the hypotheses ``parsimony`` counts as equally good and with the fewest "
        "terms, those whose screening score exceeds the best one's by less than "
        "``shape_tolerance`` noise standard errors count as indistinguishable, and the one "
        "with integer exponents and fewer logarithms is selected (the others stay with the "
        "model as alternatives and widen its prediction interval). Between ``n = 16`` and "
        "``48`` a kernel's working set leaves the caches and ``n^(11/4) * log2(n)^2`` can "
        "follow the rise a little better than the code's ``n^3``; an engineer reads integer "
        "exponents as loop nests. A prior on real codes, which is why it is narrower than "
        "``parsimony``: on truths drawn uniformly from Extra-P's exponent sets (where integer "
        "shapes are 4 of 60), lead-exponent matches at 5 % noise, 2 parameters, fell from 82 "
        "to 76 % at 1 standard error, and at 0.25 stay within a point "
        "(``docs/architecture.md``). ``0`` takes the best-screened.",
        flag=Flag(
            "--shape-tolerance",
            type=float,
            help="noise standard errors within which integer exponents and fewer logarithms "
            "are preferred (default {default}; 0: the best-scored shape)",
        ),
    )
    max_terms: int | None = option(
        None,
        kind=int,
        minimum=1,
        optional=True,
        doc="largest number of product terms in a structure besides the constant (``None``: "
        "the number of significant parameters, the paper's ``n = m + 1``).",
    )
    significance: float | None = option(
        0.001,
        minimum=0,
        below=1,
        optional=True,
        doc="level of the per-parameter noise F-test; ``0`` or ``None`` disables it.",
        flag=Flag(
            "--significance",
            type=float,
            help="level of the per-parameter noise test; 0 disables it (default {default})",
        ),
    )
    positive_terms: bool = option(
        True,
        doc="reject hypotheses with a negative term coefficient. Costs are sums of positive "
        "contributions; a negative term is almost always noise being fitted. Disable for "
        "quantities that can fall (or use negative exponents).",
        flag=Flag(
            "--allow-negative-terms",
            const=False,
            help="accept hypotheses with negative term coefficients",
        ),
    )
    weighting: str = option(
        "relative",
        choices=WEIGHTINGS,
        doc='``"relative"`` fits relative residuals (multiplicative noise), ``"none"`` plain '
        "least squares.",
        flag=Flag("--unweighted", const="none", help="plain instead of relative least squares"),
    )
    min_points: int = option(
        3, minimum=2, doc="fewest distinct values of a parameter that can support a model of it."
    )
    beyond_space: bool = option(
        True,
        doc="where the data leave the space, look beyond it: negative exponents "
        "(:data:`~perfcast.modeling.space.FALLING_EXPONENTS`) for a parameter along which a "
        "call path's metric falls on average over the design's lines (strong scaling, "
        "``n^4/p``), unless the space has negative exponents of its own; exponents above "
        "the largest (:data:`~perfcast.modeling.space.STEEPER_STEPS`) where the space's "
        "steepest shape ranks first (miniFE's ``nx^4``). Other call paths rank the space's "
        "shapes only, so typical weak-scaling models are unchanged. ``False`` is Extra-P's "
        "search (``--scaling weak``).",
    )

    def _check_together(self) -> None:
        """The per-parameter search fits every combination of ``terms`` shapes on every
        line: their number bounds its time (:data:`MAX_SHAPE_COMBINATIONS`)."""
        shapes = len(self.space.shapes)
        count = math.comb(shapes, self.terms)
        if count > MAX_SHAPE_COMBINATIONS:
            raise OptionError(
                "terms",
                f"{OPTION} {self.terms}: {count} combinations of the {shapes} shapes per "
                f"parameter, more than the limit of {MAX_SHAPE_COMBINATIONS}; use fewer "
                "terms or fewer exponents",
            )
