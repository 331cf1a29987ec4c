"""Experiment designs: full factorial, lines, Extra-P's cross and sparse, cost, shrinking."""

from perfcast.appspec import Parameter, parse_spec
from perfcast.cli import main
from perfcast.measure.design import (
    EXTRAP_LINE_POINTS,
    cross,
    full_factorial,
    lines,
    plan_from_spec,
    sparse,
)

P = Parameter("p", (1, 2, 4, 8, 16))
SIZE = Parameter("size", (10, 20, 30, 40, 50))
ITERS = Parameter("iters", (5,))


def test_full_factorial_is_every_combination():
    plan = full_factorial([P, SIZE, ITERS], repetitions=3)
    assert len(plan.points) == 25
    assert set(plan.points) == {(p, s, 5) for p in P.values for s in SIZE.values}
    assert plan.varied == ["p", "size"]
    runs = plan.runs()
    assert len(runs) == 75
    assert len({run.key for run in runs}) == 75
    # repetition r of every point before repetition r+1 (machine drift spreads evenly)
    assert [run.repetition for run in runs[:25]] == [0] * 25
    assert runs[0].key == "p=1,size=10,iters=5#0"


def test_lines_through_a_base_point():
    plan = lines([P, SIZE, ITERS], repetitions=1, base={"p": 4, "size": 30})
    assert len(plan.points) == 5 + 5 - 1
    for point in plan.points:
        assert point[2] == 5
        assert point[0] == 4 or point[1] == 30
    assert plan.varied == ["p", "size"]


def test_cross_goes_through_the_cheapest_corner():
    plan = cross([P, SIZE], repetitions=1)
    assert plan.kind == "cross"
    assert set(plan.points) == {(p, 10) for p in P.values} | {(1, s) for s in SIZE.values}
    assert not plan.notes  # five points per line, as Extra-P asks
    short = cross([Parameter("p", (1, 2)), SIZE], repetitions=1)
    assert any(f"at least {EXTRAP_LINE_POINTS}" in note for note in short.notes)


def test_sparse_adds_the_cheapest_points_off_the_cross():
    plan = sparse([P, SIZE], repetitions=1, extra_points=2)
    base = set(cross([P, SIZE], repetitions=1).points)
    extra = [point for point in plan.points if point not in base]
    assert len(plan.points) == len(base) + 2
    assert (2, 20) in extra  # the cheapest point off both lines
    assert all(point[0] > 1 and point[1] > 10 for point in extra)


def test_cost_and_subset():
    plan = full_factorial([P, SIZE], repetitions=2)
    cost = plan.cost(expected_seconds=None, timeout=10)
    assert cost.runs == 50
    assert cost.rank_runs == 2 * 5 * sum(P.values)
    assert cost.rank_seconds == cost.rank_runs * 10 and cost.bounded
    estimate = plan.cost(expected_seconds=0.5, timeout=10)
    assert estimate.rank_seconds == cost.rank_runs * 0.5 and not estimate.bounded
    small = plan.subset(lambda point: point["p"] <= 2, "taint: p only adds")
    assert len(small.points) == 10 and small.notes == ("taint: p only adds",)


SPEC = """
[run]
command = "./app {size}"
repetitions = 2
timeout = 5
[parameters]
p = [1, 2, 4, 8, 16]
size = [10, 20, 30, 40, 50]
[design]
kind = "sparse"
extra_points = 3
"""


def test_plan_from_spec_and_design_command(tmp_path, capsys):
    path = tmp_path / "perfcast.toml"
    path.write_text(SPEC)
    spec = parse_spec(SPEC, path)
    assert len(plan_from_spec(spec).points) == 9 + 3
    assert len(plan_from_spec(spec, "full").points) == 25
    assert main(["design", str(path)]) == 0
    out = capsys.readouterr().out
    assert "design: sparse over p, size" in out
    assert "12 points, 24 runs" in out
    assert "saves 13 of 25 points" in out
    assert "at most" in out  # no expected_seconds: the timeout bounds the cost
    assert main(["design", str(path), "--kind", "full"]) == 0
    assert "25 points, 50 runs" in capsys.readouterr().out
