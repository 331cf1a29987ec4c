"""Regimes: a model that crosses a change of regime is refitted on the last segment.

Between ``n = 16`` and ``48`` a kernel's working set leaves the caches and its time per
element jumps; one PMNF across the jump invents growth (``n^3 log2(n)^2``) that does not
continue, and HPCG's ``TestCG`` runs twice the iterations at ``p >= 2`` as at ``p = 1``,
which a fit turns into growth in ``p``. :func:`perfcast.modeling.regimes.find_regime_change`
finds such a break in a call path's repetitions; this stage refits the call path on the
points of the last segment, the regime that continues, and says so:

* a model fixed by a prior (effort counts, a static formula) keeps its terms, which the
  exact counts decided, and refits their coefficients on the segment (each point's fastest
  repetition, as every fixed fit);
* any other model is searched again on the segment, under its restriction if it has one
  (taint).

The model keeps a warning that names the change, with its uncertainty, and the model of
all points; a finding of stage ``regime`` says the same for the report. A last segment with
fewer than ``min_points`` values of the parameter cannot be searched, and one no model fits
well is no better: the model is kept, with a warning (:data:`SHORT_SEGMENT`) that makes it
unfit to extrapolate (:mod:`perfcast.modeling.extrapolation`), naming the runs to add.

Counts are never segmented: they are exact, and their models reproduce every value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from perfcast.experiment.experiment import Experiment
from perfcast.experiment.points import format_value
from perfcast.modeling.advice import POOR_FIT, SHORT_SEGMENT, extend_series
from perfcast.modeling.findings import Finding
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.noise import f_survival
from perfcast.modeling.pmnf import Model
from perfcast.modeling.prior import Prior
from perfcast.modeling.prior_fit import FixedFit
from perfcast.modeling.regimes import RegimeChange, find_regime_change, last_segment
from perfcast.modeling.search import RIVAL_TOLERANCE

STAGE = "regime"

LACK_OF_FIT = 0.001
"""Level of the lack-of-fit test below which a model misses its points beyond the noise
and a change of regime is looked for (the regime test's own level)."""

NOISE_FLOOR = 1e-3
"""Smallest relative noise the lack-of-fit test assumes: identical repetitions (cached or
synthetic values) would make any rounding of a fit a misfit."""

MIN_SHARE = 0.005
"""Least share of its metric (median over all points and repetitions, against the sum over
call paths) that a call path must carry to be tested: a change of regime in a call path of
0.1 % moves no answer, and each test costs milliseconds."""

MOST_TESTED = 100
"""Most call paths tested per metric, the costliest first: the test's cost stays bounded on
codes with thousands of call paths above :data:`MIN_SHARE`."""

REGIME_WARNING = "regime change"
"""The start of the warning on a model refitted on the last segment (what
:meth:`~perfcast.modeling.regimes.RegimeChange.describe` says first)."""


def segment_models(
    models: ModelSet,
    experiment: Experiment,
    modeler: PMNFModeler,
    fixed: FixedFit,
    priors: Mapping[tuple[str, str], Prior],
    skip: Sequence[str],
) -> ModelSet:
    """``models`` with every model of a metric not in ``skip`` that crosses a change of
    regime refitted on its last segment (module docstring). ``priors`` are the composed
    priors the models were fitted under."""
    parameters = experiment.parameters
    if not parameters:
        return models
    replaced: list[Model] = []
    findings: list[Finding] = []
    for (callpath, metric), coordinates, repetitions in _series(experiment, skip):
        model = models.get((callpath, metric))
        if model is None:
            continue
        if _fits_within_noise(model, coordinates, repetitions, parameters):
            continue
        change = find_regime_change(coordinates, repetitions, parameters)
        if change is None:
            continue
        mask = last_segment(coordinates, parameters, change)
        after = np.unique(coordinates[mask, parameters.index(change.parameter)])
        if len(after) < modeler.min_points:
            more = extend_series(after if len(after) else np.array([change.above]), 2)
            replaced.append(
                _warned(
                    model,
                    f"{SHORT_SEGMENT}: {change.describe()}, but only {len(after)} value(s) "
                    f"of {change.parameter} lie beyond it, too few to model the new regime; "
                    f"measure {change.parameter}="
                    f"{', '.join(map(format_value, more))} as well",
                )
            )
            continue
        segment = _segment_experiment(experiment, callpath, metric, change)
        # the prior the kept model was fitted under: none where a conflict kept the free fit
        prior = priors.get((callpath, metric)) if model.prior is not None else None
        refitted = _refit(segment, callpath, metric, modeler, fixed, prior)
        if refitted is None:
            continue
        if any(w.startswith(POOR_FIT) for w in refitted.warnings):
            poor = next(w for w in refitted.warnings if w.startswith(POOR_FIT)).split(";")[0]
            replaced.append(
                _warned(
                    model,
                    f"{SHORT_SEGMENT}: {change.describe()}, but no model describes the "
                    f"{int(mask.sum())} points beyond it ({poor}); measure more values of "
                    f"{change.parameter} above {format_value(change.above)}, or more repetitions",
                )
            )
            continue
        text = (
            f"{change.describe()}; fitted to the {int(mask.sum())} points "
            f"with {change.parameter} >= {format_value(change.above)}; the model of all points was "
            f"{model.text()}"
        )
        replaced.append(_warned(replace(refitted, prior=model.prior), text))
        findings.append(Finding(STAGE, callpath, metric, change.kind, text))
    if not replaced:
        return models
    return models.with_models(replaced).with_findings(findings)


def _fits_within_noise(
    model: Model, coordinates: np.ndarray, repetitions: np.ndarray, parameters: Sequence[str]
) -> bool:
    """Does the one model of all points miss the point means by no more than the
    repetitions' own scatter (a lack-of-fit F-test in log space at :data:`LACK_OF_FIT`)?
    Then there is nothing for a second regime to explain: a smooth ``log2(p)^2`` bends
    like a change of slope over a few values, and the model already follows it. Without
    repetitions the test cannot run, and the regime test alone decides."""
    present = ~np.isnan(repetitions)
    count = present.sum(axis=1)
    if np.any(repetitions[present] <= 0) or int(np.sum(count - 1)) < 1:
        return False
    point = {name: coordinates[:, j] for j, name in enumerate(parameters)}
    prediction = np.broadcast_to(model.evaluate(point), (len(coordinates),))
    if np.any(prediction <= 0):
        return False
    logs = np.log(np.where(present, repetitions, 1.0))
    mean = np.where(present, logs, 0.0).sum(axis=1) / np.maximum(count, 1)
    pure = float(np.sum(np.where(present, logs - mean[:, None], 0.0) ** 2))
    pure_df = int(np.sum(count - 1))
    lack = float(np.sum(count * (mean - np.log(prediction)) ** 2))
    lack_df = len(coordinates) - len(model.terms) - 1
    if lack_df < 1:
        return True  # as many coefficients as points: nothing left to test
    noise = max(pure / pure_df, NOISE_FLOOR**2)
    return float(f_survival((lack / lack_df) / noise, lack_df, pure_df)) > LACK_OF_FIT


def _series(
    experiment: Experiment, skip: Sequence[str]
) -> list[tuple[tuple[str, str], np.ndarray, np.ndarray]]:
    """Per (call path, metric) outside ``skip`` that carries at least :data:`MIN_SHARE` of
    its metric (the most costly :data:`MOST_TESTED` of them): its points and their
    repetitions (points x repetitions, NaN-padded). From the experiment's columns, without
    its pandas table (``perfcast model`` on a text file loads no pandas)."""
    columns = experiment.columns
    if not len(columns):
        return []
    skipped = np.isin(np.asarray(columns.metrics, dtype=object), list(skip))
    keep = ~skipped[columns.metric]
    callpath, metric = columns.callpath[keep], columns.metric[keep]
    value = columns.value[keep]
    coordinates = np.stack([c[keep] for c in columns.coordinates], axis=1)
    if not keep.any():  # nothing but counts
        return []
    key = callpath * len(columns.metrics) + metric
    order = np.argsort(key, kind="stable")
    keys, starts = np.unique(key[order], return_index=True)
    bounds = [*starts[1:], len(order)]
    sizes: dict[int, list[tuple[int, float]]] = {}
    for k, start, stop in zip(keys, starts, bounds, strict=True):
        rows = order[start:stop]
        sizes.setdefault(int(k % len(columns.metrics)), []).append(
            (int(k), float(np.median(value[rows])))
        )
    tested: set[int] = set()
    for entries in sizes.values():
        total = sum(size for _, size in entries)
        ranked = sorted(entries, key=lambda entry: -entry[1])
        tested |= {k for k, size in ranked[:MOST_TESTED] if total > 0 and size >= MIN_SHARE * total}
    out = []
    for k, start, stop in zip(keys, starts, bounds, strict=True):
        if int(k) not in tested:
            continue
        rows = order[start:stop]
        points, inverse = np.unique(coordinates[rows], axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        width = int(np.bincount(inverse).max())
        wide = np.full((len(points), width), np.nan)
        slot = np.zeros(len(points), dtype=int)
        for row, point in zip(rows, inverse, strict=True):
            wide[point, slot[point]] = value[row]
            slot[point] += 1
        name = (
            columns.callpaths[int(k) // len(columns.metrics)],
            columns.metrics[int(k) % len(columns.metrics)],
        )
        out.append((name, points, wide))
    return out


def _segment_experiment(
    experiment: Experiment, callpath: str, metric: str, change: RegimeChange
) -> Experiment:
    """The call path's metric at the points of the last segment."""
    one = experiment.restricted(callpaths=[callpath], metrics=[metric])
    after = one.columns.coordinates[one.parameters.index(change.parameter)] >= change.above
    return Experiment.from_columns(
        one.parameters, one.columns.masked(after), one.metrics.values(), source=one.source
    )


def _refit(
    segment: Experiment,
    callpath: str,
    metric: str,
    modeler: PMNFModeler,
    fixed: FixedFit,
    prior: Prior | None,
) -> Model | None:
    """The model of the segment: the prior's fixed terms refitted, or a new search."""
    if prior is not None and prior.structure is not None:
        fitted = fixed.fit_coefficients(segment, {callpath: prior}, metric)
        return next((m for m in fitted if m.callpath == callpath), None)
    priors = {callpath: prior} if prior is not None else {}
    # A segment has few values of its parameter (three of five, often), which tell
    # neighbouring exponents apart even less than the whole range: among the rivals the
    # measurements cannot tell from the best fit, the simplest is taken there.
    tolerance = max(modeler.shape_tolerance, modeler.parsimony, RIVAL_TOLERANCE)
    simplest = modeler.with_params(shape_tolerance=tolerance, parsimony=tolerance)
    searched = simplest.fit(segment, priors)
    return searched.get((callpath, metric))


def _warned(model: Model, text: str) -> Model:
    """``model`` with ``text`` first among its warnings."""
    return replace(model, warnings=(text, *model.warnings))
