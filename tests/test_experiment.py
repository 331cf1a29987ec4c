import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.experiment import Experiment
from perfcast.experiment.metrics import base_metric, is_max, with_max


def make() -> Experiment:
    rows = []
    for p in (2, 4, 8):
        for rep in range(3):
            rows.append(("main->solve", "time", (p, 10), p * 1.0 + rep))
            rows.append(("main", "time", (p, 10), 5.0))
    return Experiment.from_rows(["p", "n"], rows)


def test_repetitions_are_numbered_and_kept():
    exp = make()
    assert len(exp) == 18
    assert sorted(exp.select("main->solve").repetition.unique()) == [0, 1, 2]
    assert exp.callpaths == ["main->solve", "main"]
    np.testing.assert_array_equal(exp.coordinates(), [[2, 10], [4, 10], [8, 10]])


def test_call_tree_derived_from_paths():
    tree = make().call_tree
    assert [n.path for n in tree] == ["main", "main->solve"]
    assert tree["main->solve"].parent is tree["main"]


def test_aggregate_median_and_spread():
    table = make().aggregate("median")
    solve = table[table.callpath == "main->solve"].set_index("p")
    assert solve.loc[4, "value"] == 5.0
    assert solve.loc[4, "repetitions"] == 3
    assert solve.loc[4, "spread"] == pytest.approx(1.0 / 5.0)
    assert (table[table.callpath == "main"].spread == 0).all()


def test_nan_is_rejected_with_location():
    exp = Experiment.from_rows(["p"], [("f", "time", (2,), float("nan"))], source="x.txt")
    with pytest.raises(InputError, match=r"x\.txt: .*NaN.*'f'.*p=2"):
        exp.validate()


def test_reserved_parameter_name_rejected():
    with pytest.raises(InputError, match="not allowed"):
        Experiment.from_rows(["value"], [])


def test_the_per_rank_maximum_is_one_suffix_added_recognised_and_removed_in_one_place():
    assert with_max("time_inclusive") == "time_inclusive:max"
    assert is_max("time_inclusive:max") and not is_max("time_inclusive")
    assert base_metric(with_max("basic_blocks")) == "basic_blocks" == base_metric("basic_blocks")
