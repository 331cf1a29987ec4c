"""The walkthrough's tables: the most expensive call paths and their models side by side.

    python3 examples/walkthrough/top_callpaths.py RANKED.json [LABEL=MODELS.json:METRIC ...]

ranks the call paths of RANKED.json's ``cpu_time`` models (or ``--metric``) by their value
at the largest measured point (the model file's provenance), exclusive as perfcast
measures it, and prints a Markdown table: for each of the ``--top`` call paths its value
there and, per ``LABEL=FILE:METRIC`` column, the model that file holds for it, with the
prior that constrained it and its fit (SMAPE). docs/walkthrough.md is written from it; the
plausibility of each model is judged there, by hand, against the code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.experiment.names import display_names
from perfcast.modeling import ModelSet
from perfcast.modeling.pmnf import Model


def _column(text: str) -> tuple[str, Path, str]:
    label, _, rest = text.partition("=")
    path, _, metric = rest.rpartition(":")
    if not label or not path or not metric:
        raise argparse.ArgumentTypeError(f"{text!r}: give LABEL=MODELS.json:METRIC")
    return label, Path(path), metric


def _model(models: ModelSet, callpath: str, metric: str) -> Model | None:
    """The model of (callpath, metric), None where the file has none (no counts of MPI
    calls, no taint prior for a metric the taint run did not model)."""
    try:
        return models[(callpath, metric)]
    except KeyError:
        return None


def _cell(model: Model | None) -> str:
    if model is None:
        return "-"
    prior = model.prior.split(":")[0] if model.prior else "free"
    smape = model.statistics.smape
    fit = f", SMAPE {smape:.0f} %" if smape is not None and smape == smape else ""
    return f"`{model.text(3)}` ({prior}{fit})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ranked", type=Path, help="model file whose values rank the call paths")
    parser.add_argument("columns", nargs="*", type=_column, help="LABEL=MODELS.json:METRIC")
    parser.add_argument("--metric", default="cpu_time", help="the ranking metric")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()

    ranked = ModelSet.load(args.ranked)
    if ranked.provenance is None:
        raise SystemExit(f"{args.ranked}: no provenance, so no measured range to rank at")
    largest = {name: high for name, (_, high) in ranked.provenance.ranges.items()}
    values = {
        model.callpath: float(model.evaluate(largest))
        for model in ranked
        if model.metric == args.metric
    }
    top = sorted(values, key=values.__getitem__, reverse=True)[: args.top]
    names = display_names(top, width=70)
    sets = [(label, ModelSet.load(path), metric) for label, path, metric in args.columns]

    where = ", ".join(f"{name}={value:g}" for name, value in largest.items())
    print(f"| call path | {args.metric} at {where} | " + " | ".join(c[0] for c in sets) + " |")
    print("|---" * (2 + len(sets)) + "|")
    for callpath in top:
        cells = [_cell(_model(models, callpath, metric)) for _, models, metric in sets]
        print(f"| `{names[callpath]}` | {values[callpath]:.3g} s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
