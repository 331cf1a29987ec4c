"""Models as tables and pictures: what a notebook shows and what pandas users join.

A :class:`~perfcast.modeling.modelset.ModelSet` or a
:class:`~perfcast.modeling.pmnf.Model` left as the last expression of a Jupyter cell shows
itself through the hooks here (``_repr_html_``, ``_repr_latex_``): the formula as LaTeX,
the fit's statistics and what the stages said of it. :func:`model_table` is the table as
a pandas DataFrame, one row per model, with a target the value there, its prediction
interval, the growth from the largest measured point and why the model cannot be read
there; the shape thicket users join
to a statsframe (:mod:`perfcast.integrations.thicket`). :func:`plot_model` draws a model
along one parameter with its interval and the measured values; it needs matplotlib
(``pip install 'perfcast[notebook]'``), imported only when a plot is drawn.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from perfcast.errors import InputError
from perfcast.modeling.extrapolation import unfit_reasons
from perfcast.modeling.intervals import prediction_interval
from perfcast.modeling.pmnf import Model

if TYPE_CHECKING:
    import pandas as pd

    from perfcast.experiment.experiment import Experiment
    from perfcast.modeling.modelset import ModelSet

MODEL_COLUMNS = ("callpath", "metric", "model", "smape", "adjusted_r2", "points", "notes")
TARGET_COLUMNS = ("at_target", "lower", "upper", "growth", "unfit")
"""Columns added when a target is given: the value there, its 95 % prediction interval,
the ratio to the value at the largest measured point, and every reason the model is not
fit to be read there (:func:`perfcast.modeling.extrapolation.unfit_reasons`; empty: it
is): the same judgement the summary ranks by, so a table never shows a formula the
summary would set apart without saying so."""

HTML_ROWS = 50
"""Rows a model set's HTML table shows; the DataFrame holds them all."""


def model_table(
    models: ModelSet,
    target: Mapping[str, float] | None = None,
    values: Mapping[str, Sequence[float]] | None = None,
) -> pd.DataFrame:
    """Every model as one row of a DataFrame, in the set's order (:data:`MODEL_COLUMNS`,
    and :data:`TARGET_COLUMNS` with a ``target``). ``values``: the distinct measured
    values of each parameter, where known, for the judgement at the target; the largest
    measured point is the models' provenance's."""
    import pandas as pd

    largest = None
    if models.provenance is not None:
        largest = {name: high for name, (_, high) in models.provenance.ranges.items()}
    rows = []
    for model in models:
        row: dict[str, Any] = {
            "callpath": model.callpath,
            "metric": model.metric,
            "model": model.text(),
            "smape": model.statistics.smape,
            "adjusted_r2": model.statistics.adjusted_r2,
            "points": model.statistics.points,
            "notes": "; ".join(models.notes((model.callpath, model.metric))),
        }
        if target is not None:
            value = _at(model, target)
            lower, upper = prediction_interval(model, target)
            now = _at(model, largest) if largest is not None else math.nan
            unfit = unfit_reasons(model, target, values or {}, models.provenance)
            row.update(
                at_target=value,
                lower=float(lower),
                upper=float(upper),
                growth=value / now if now and math.isfinite(now) else math.nan,
                unfit="; ".join(reason.text() for reason in unfit),
            )
        rows.append(row)
    columns = [*MODEL_COLUMNS, *(TARGET_COLUMNS if target is not None else ())]
    return pd.DataFrame(rows, columns=columns)


def _at(model: Model, point: Mapping[str, float]) -> float:
    try:
        return float(model.evaluate(point))
    except InputError:  # outside the model's domain (log2 of 0): no value there
        return math.nan


def model_html(model: Model) -> str:
    """A model for a notebook: where it was fitted, its formula, its fit statistics."""
    statistics = model.statistics
    notes = "".join(f"<li>{html.escape(w)}</li>" for w in model.warnings)
    return (
        f"<div><b>{html.escape(model.callpath)}</b> ({html.escape(model.metric)})"
        f"<div>$$ {model.latex()} $$</div>"
        f"<div>SMAPE {statistics.smape:.3g} %, adjusted R&sup2; {statistics.adjusted_r2:.3g},"
        f" {statistics.points} points</div>" + (f"<ul>{notes}</ul>" if notes else "") + "</div>"
    )


def model_set_html(models: ModelSet) -> str:
    """A model set for a notebook: a table of its first :data:`HTML_ROWS` models."""
    header = "".join(f"<th>{name}</th>" for name in MODEL_COLUMNS)
    rows = []
    for model in list(models)[:HTML_ROWS]:
        statistics = model.statistics
        cells = [
            html.escape(model.callpath),
            html.escape(model.metric),
            f"\\({model.latex()}\\)",
            f"{statistics.smape:.3g}",
            f"{statistics.adjusted_r2:.3g}",
            str(statistics.points),
            html.escape("; ".join(models.notes((model.callpath, model.metric)))),
        ]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    more = len(models) - HTML_ROWS
    footer = f"<p>... and {more} more (ModelSet.to_dataframe() holds all)</p>" if more > 0 else ""
    return (
        f"<p>{len(models)} models over {html.escape(', '.join(models.parameters))}</p>"
        f"<table><tr>{header}</tr>{''.join(rows)}</table>{footer}"
    )


def plot_model(
    model: Model,
    parameter: str,
    *,
    experiment: Experiment | None = None,
    at: Mapping[str, float] | None = None,
    until: float | None = None,
    ax: Any = None,
) -> Any:
    """Draw ``model`` along ``parameter`` with its 95 % prediction interval, from the
    smallest measured value (or 1) to ``until`` (default: twice the largest measured
    value), other parameters held at ``at``; the measured values of ``experiment`` as
    points. Returns the matplotlib Axes."""
    from perfcast.lazy import optional_module

    pyplot = optional_module(
        "matplotlib.pyplot", "plotting a model needs matplotlib", "pip install 'perfcast[notebook]'"
    )
    held = dict(at or {})
    measured = None
    if experiment is not None:
        measured = experiment.aggregate().query(
            "callpath == @model.callpath and metric == @model.metric"
        )
        for name in experiment.parameters:
            if name != parameter and name not in held:
                held[name] = float(measured[name].max())
    missing = [p for p in model.parameters if p != parameter and p not in held]
    if missing:
        raise InputError(
            f"plotting along {parameter} needs values of {', '.join(missing)}: give them as "
            "at={...}, or pass the experiment"
        )
    start = float(measured[parameter].min()) if measured is not None else 1.0
    end = until or (2 * float(measured[parameter].max()) if measured is not None else 1024.0)
    values = np.geomspace(max(start, 1e-12), end, 200)
    point = {**{name: np.full_like(values, v) for name, v in held.items()}, parameter: values}
    if ax is None:
        _, ax = pyplot.subplots()
    ax.plot(values, model.evaluate(point), label=model.text(3))
    lower, upper = prediction_interval(model, point)
    if np.isfinite(lower).any():
        ax.fill_between(values, lower, upper, alpha=0.25, label="95 % prediction interval")
    if measured is not None:
        for name, value in held.items():
            if name in measured and name != parameter:
                measured = measured[measured[name] == value]
        ax.scatter(
            measured[parameter], measured["value"], color="black", zorder=3, label="measured"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel(parameter)
    ax.set_ylabel(model.metric)
    ax.set_title(model.callpath, fontsize="small")
    ax.legend(fontsize="small")
    return ax
