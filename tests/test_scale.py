"""The code paths that keep `perfcast model` linear in call paths give the results of the
simple ones they replace. Time and memory are measured by ``benchmarks/scale.py``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.experiment.io import table
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.report.summary import _values_at


def _model(callpath: str, constant: float, *terms: tuple[float, tuple[Factor, ...]]) -> Model:
    return Model(callpath, "time", constant, tuple(Term(c, f) for c, f in terms))


P2 = Factor("p", Fraction(2))
P_LOG = Factor("p", Fraction(1, 3), 2)
N_ROOT = Factor("n", Fraction(1, 2))


def test_values_at_shared_factors_equal_each_models_own_evaluation():
    models = [
        _model("main", 3.0),
        _model("main->a", 1.5, (2.5e-3, (P2,))),
        _model("main->b", -0.25, (7.0, (P_LOG, N_ROOT)), (1e-9, (P2, N_ROOT))),
        _model("main->c", 0.0, (3.0, (N_ROOT,)), (4.0, (P_LOG,))),
    ]
    largest, target = {"p": 64.0, "n": 1000.0}, {"p": 256.0, "n": 4000.0}
    both = {k: np.array([largest[k], target[k]]) for k in largest}
    expected = [tuple(np.broadcast_to(m.evaluate(both), 2).tolist()) for m in models]
    assert _values_at(models, largest, target) == expected


def test_values_at_raises_the_models_own_error_outside_the_domain():
    log = _model("main->log", 1.0, (1.0, (Factor("p", Fraction(0), 1),)))
    with pytest.raises(InputError, match=r"p=0 is outside the domain of the model of 'main->log'"):
        _values_at([log], {"p": 0.0}, {"p": 4.0})


def test_values_at_raises_the_models_own_error_beyond_floating_point():
    huge = _model("main->huge", 1.0, (1e300, (P2,)))
    with pytest.raises(InputError, match="beyond what a floating-point number holds"):
        _values_at([huge], {"p": 1e3}, {"p": 1e5})


def _text_file(path, callpaths: int, repetitions: int = 3, bad: tuple[int, str] | None = None):
    """A text file with one call path per block; ``bad`` replaces the value at (DATA line
    index, counted over the whole file) with the given token."""
    lines = ["PARAMETER p", "POINTS ( 1 ) ( 2 ) ( 4 )"]
    data_index = 0
    for c in range(callpaths):
        lines += [f"REGION main->k{c}", "METRIC time"]
        for p in (1, 2, 4):
            values = [f"{c + p * 0.5 + r * 0.01!r}" for r in range(repetitions)]
            if bad is not None and bad[0] == data_index:
                values[-1] = bad[1]
            lines.append("DATA " + " ".join(values))
            data_index += 1
    path.write_text("\n".join(lines) + "\n")
    return path


def test_values_converted_in_chunks_equal_values_converted_at_once(tmp_path, monkeypatch):
    path = _text_file(tmp_path / "m.txt", callpaths=7)
    whole = read_experiment(path).data
    monkeypatch.setattr(table, "CHUNK_VALUES", 4)
    chunked = read_experiment(path).data
    pd.testing.assert_frame_equal(whole, chunked)
    assert chunked["value"].iloc[-1] == 6 + 2.0 + 0.02


def test_a_bad_value_in_a_later_chunk_names_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "CHUNK_VALUES", 4)
    path = _text_file(tmp_path / "m.txt", callpaths=5, bad=(10, "1.5x"))
    # 2 header lines, then 5 lines per call path: DATA line 10 is call path 3's second,
    # line 2 + 3 * 5 + 2 + 2, its values in the eighth chunk of 4.
    with pytest.raises(InputError, match=r"m\.txt:21: measured value '1\.5x' is not a number"):
        read_experiment(path)


def test_repetitions_continue_over_entries_of_the_same_point(tmp_path):
    """JSON Lines may give one point's repetitions in several records, interleaved with
    other call paths; numbering counts on from the earlier records."""
    records = [
        ('{"params": {"p": 1}, "callpath": "a", "metric": "t", "value": [1, 2]}'),
        ('{"params": {"p": 1}, "callpath": "b", "metric": "t", "value": 5}'),
        ('{"params": {"p": 1}, "callpath": "a", "metric": "t", "value": 3}'),
        ('{"params": {"p": 2}, "callpath": "a", "metric": "t", "value": [4, 5]}'),
        ('{"params": {"p": 2}, "callpath": "b", "metric": "t", "value": [6, 7, 8]}'),
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(records) + "\n")
    data = read_experiment(path).data
    assert data["repetition"].tolist() == [0, 1, 0, 2, 0, 1, 0, 1, 2]
    assert data["value"].tolist() == [1, 2, 5, 3, 4, 5, 6, 7, 8]


def _experiment() -> Experiment:
    frame = pd.DataFrame(
        {
            "callpath": ["main", "main", "main->a", "main->a"],
            "metric": ["time", "visits", "time", "time"],
            "p": [1.0, 1.0, 1.0, 2.0],
            "repetition": [0, 0, 0, 0],
            "value": [1.0, 2.0, 3.0, 4.0],
        }
    )
    return Experiment(["p"], frame, [Metric("time", "s"), Metric("visits")])


def test_restricted_to_everything_is_the_experiment_itself():
    experiment = _experiment()
    assert experiment.restricted() is experiment
    assert experiment.restricted(metrics=["time", "visits"]) is experiment


def test_restricted_drops_metrics_no_kept_row_measures():
    kept = _experiment().restricted(callpaths=["main->a"])
    assert kept.data["value"].tolist() == [3.0, 4.0]
    assert kept.data.index.tolist() == [0, 1]
    assert kept.metrics == {"time": Metric("time", "s")}


def test_experiment_orders_columns_and_index_of_other_frames():
    frame = _experiment().data[["value", "p", "metric", "callpath", "repetition"]].iloc[::-1]
    data = Experiment(["p"], frame).data
    assert list(data.columns) == ["callpath", "metric", "p", "repetition", "value"]
    assert data.index.tolist() == [0, 1, 2, 3]
    assert data["value"].tolist() == [4.0, 3.0, 2.0, 1.0]
