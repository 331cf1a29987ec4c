"""The taint profile as a typed contract: what ``perfcast taint`` writes is read back to the
same profile, every malformed part is refused naming the file and the key, versions are
checked, and the readers (priors, filter, design interactions, the match to measured call
paths) work on the typed profile."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.modeling.prior import Prior
from perfcast.taint.filter import instrumented_functions, relevant_functions
from perfcast.taint.interactions import interactions
from perfcast.taint.priors import function_priors_from_profile, prior_from_terms
from perfcast.taint.profile_model import (
    CONSTANT,
    FORMAT,
    CallpathProfile,
    TaintProfile,
    read_profile,
)
from perfcast.taint.validity import match_profile


def _callpath(terms: list[list[str]], visits: list[list[str]], exclusive: list[list[str]]) -> dict:
    def render(dependency: list[list[str]]) -> str:
        return " + ".join("*".join(t) for t in dependency) or "1"

    return {
        "params": sorted({n for t in terms for n in t}),
        "dependency": render(terms),
        "terms": terms,
        "exclusive_dependency": render(exclusive),
        "exclusive_terms": exclusive,
        "loops": [],
        "mpi": {},
        "visits": render(visits),
        "visits_terms": visits,
    }


WRITTEN: dict[str, Any] = {
    "format": FORMAT,
    "parameters": {
        "n": {"source": "argv:1", "loops": 2, "functions": 2, "branches": 1, "mpi": []},
        "p": {"source": "MPI_Comm_size", "loops": 0, "functions": 0, "branches": 0,
              "mpi": ["MPI_Allreduce"]},
        "iters": {"source": "argv:2", "loops": 1, "functions": 1, "branches": 0, "mpi": []},
    },
    "functions": {
        "main": {
            "file": "app.c", "line": 20, "params": ["iters", "n", "p"],
            "dependency": "iters*n*p", "terms": [["iters", "n", "p"]],
            "exclusive_dependency": "iters", "exclusive_terms": [["iters"]],
            "loops": [{"line": 22, "kind": "for", "params": ["iters"], "executed": True,
                       "constant_bounds": False,
                       "loops": [{"line": 23, "kind": "while", "params": [], "executed": None,
                                  "constant_bounds": True, "loops": []}]}],
            "branches": [{"line": 24, "params": ["n"], "in_loop": True, "exits_loops_at": [],
                          "evaluated": 2, "taken": 2, "calls": ["solve(int)"]}],
            "mpi": {}, "recursive": False,
            "callpaths": {"main": _callpath([["iters", "n", "p"]], [], [["iters"]])},
        },
        "solve(int)": {
            "file": "app.c", "line": 5, "params": ["n", "p"], "dependency": "n*p",
            "terms": [["n", "p"]], "exclusive_dependency": "n", "exclusive_terms": [["n"]],
            "loops": [], "branches": [],
            "mpi": {"MPI_Allreduce": {"params": ["p"], "calls": 4}}, "recursive": False,
            "callpaths": {"main->solve(int)": _callpath([["n", "p"]], [["iters"]], [["n"]])},
        },
        "MPI_Allreduce": {
            "file": None, "line": None, "library": "MPI", "params": ["p"], "dependency": "p",
            "terms": [["p"]], "exclusive_dependency": "p", "exclusive_terms": [["p"]],
            "loops": [], "branches": [], "mpi": {}, "recursive": False,
            "callpaths": {"main->solve(int)->MPI_Allreduce": {
                "params": ["p"], "dependency": "p", "terms": [["p"]],
                "visits": "iters", "visits_terms": [["iters"]]}},
        },
    },
    "pruned": ["helper"],
    "constant": [],
    "not_executed": ["fallback"],
    "relevant": ["main", "solve(int)"],
    "unused_parameters": [],
    "batches": [["n", "iters", "p"]],
    "processes": 2,
    "run": {"command": "./app 8 2", "spec": "perfcast.toml", "point": {"n": 8, "p": 2}},
    "warnings": ["a note"],
}  # fmt: skip
"""A profile in the form ``perfcast taint`` writes, every key present."""


def write(directory: Path, data: Any, name: str = "profile.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(data))
    return path


def test_a_written_profile_reads_back_to_the_same_file(tmp_path: Path) -> None:
    profile = TaintProfile.from_json(WRITTEN)
    assert profile.to_json() == WRITTEN
    path = tmp_path / "profile.json"
    profile.save(path)
    assert read_profile(path) == profile
    assert json.loads(path.read_text()) == WRITTEN


def test_attributes_say_what_the_keys_said() -> None:
    profile = TaintProfile.from_json(WRITTEN)
    solve = profile.functions["solve(int)"]
    assert solve.dependency == "n*p" and not solve.is_library
    assert profile.functions["MPI_Allreduce"].is_library
    assert solve.callpaths["main->solve(int)"].visits == {frozenset({"iters"})}
    assert profile.functions["main"].branches[0].calls == ("solve(int)",)
    assert [loop.line for loop in profile.functions["main"].loops[0].walk()] == [22, 23]
    assert profile.parameters["p"].mpi == ("MPI_Allreduce",)
    assert profile.run is not None and profile.run.point == {"n": 8, "p": 2}


def test_totals_multiply_the_cost_of_a_call_by_its_visits() -> None:
    entry = CallpathProfile(
        terms=frozenset({frozenset({"n"}), frozenset({"m"})}),
        exclusive_terms=CONSTANT,
        visits=frozenset({frozenset({"iters"})}),
    )
    assert entry.total() == {frozenset({"iters", "n"}), frozenset({"iters", "m"})}
    # constant per call, called `iters` times: the total still grows with iters
    assert entry.total(inclusive=False) == {frozenset({"iters"})}
    assert CallpathProfile(terms=CONSTANT, exclusive_terms=CONSTANT).total() == CONSTANT


def test_a_function_merges_its_call_paths_or_falls_back_to_its_own_terms() -> None:
    data = copy.deepcopy(WRITTEN)
    data["functions"]["solve(int)"]["callpaths"]["main->other->solve(int)"] = _callpath(
        [["n"]], [], [["n"]]
    )
    data["functions"]["lonely"] = {"file": "app.c", "terms": [["n"]], "callpaths": {}}
    priors = function_priors_from_profile(TaintProfile.from_json(data))
    assert priors["solve(int)"].multiplicative == (frozenset({"iters", "n", "p"}),)
    assert priors["lonely"].parameters == frozenset({"n"})


def test_terms_are_absorbed_and_the_constant_is_empty() -> None:
    data = copy.deepcopy(WRITTEN)
    data["functions"]["main"]["terms"] = [["n"], ["n", "p"], []]
    data["functions"]["solve(int)"]["terms"] = []
    profile = TaintProfile.from_json(data)
    assert profile.functions["main"].terms == {frozenset({"n", "p"})}
    assert profile.functions["solve(int)"].terms == CONSTANT
    assert profile.functions["solve(int)"].dependency == "1"


def test_priors_order_their_products_the_same_way_every_time() -> None:
    one = prior_from_terms([["m", "n"], ["k"], ["a", "b"]])
    two = prior_from_terms([["k"], ["a", "b"], ["n", "m"]])
    assert one == two
    assert one.multiplicative == (frozenset("ab"), frozenset("mn"), frozenset("k"))


def test_a_profile_reduced_by_hand_loads_with_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, {"format": FORMAT, "parameters": {"n": {}}, "functions": {
        "main": {"file": "app.c", "terms": [["n"]],
                 "callpaths": {"main": {"terms": [["n"]]}}}}})  # fmt: skip
    profile = read_profile(path)
    main = profile.functions["main"]
    assert main.exclusive_terms == main.terms and main.branches == () and main.line is None
    assert main.callpaths["main"].visits == CONSTANT
    assert profile.parameters["n"].source is None and profile.relevant is None
    # the filter needs the list the taint run writes, and says so
    with pytest.raises(InputError, match="no 'relevant' list"):
        relevant_functions(profile)


def test_filter_and_design_read_the_typed_profile() -> None:
    profile = TaintProfile.from_json(WRITTEN)
    assert instrumented_functions(profile) == ["main", "solve(int)"]  # fallback: no switch arm
    found = interactions(profile)
    assert found.marked == {"n", "p", "iters"}
    assert found.interact("n", "p") and found.interact("iters", "n")
    assert found.witnesses("n", "p") == ("main", "solve(int)")
    assert found.terms == {frozenset({"iters", "n", "p"})}


def test_the_filter_keeps_unseen_functions_only_where_a_switch_calls_them() -> None:
    """A function the taint run never reached is measured only as the untaken arm of an
    algorithm switch (issue 25): any other may be a helper called millions of times at
    other points, whose instrumentation would cost more than its work."""
    data = copy.deepcopy(WRITTEN)
    data["not_executed"] = ["fallback", "debug_dump", "other [b.c]"]
    switch = {"line": 30, "params": ["n"], "in_loop": False, "exits_loops_at": [],
              "evaluated": 2, "taken": 0, "calls": ["fallback", "other [b.c]"],
              "selects_work": True}  # fmt: skip
    data["functions"]["main"]["branches"].append(switch)
    assert instrumented_functions(TaintProfile.from_json(data)) == [
        "fallback",
        "main",
        "other",
        "solve(int)",
    ]
    # the same branch with mixed outcomes splits work by data: no switch, no unseen arm
    switch.update(taken=1)
    assert instrumented_functions(TaintProfile.from_json(data)) == ["main", "solve(int)"]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["functions"]["main"]["loops"][0]["loops"][0].update(params="n"),
         'functions["main"].loops[0].loops[0].params must be a list of names'),
        (lambda d: d["functions"]["main"]["loops"][0].pop("kind"),
         "functions[\"main\"].loops[0] has no 'kind'"),
        (lambda d: d["functions"]["main"]["branches"][0].update(exits_loops_at=["x"]),
         'functions["main"].branches[0].exits_loops_at[0] must be a line number'),
        (lambda d: d["functions"]["main"]["branches"][0].update(taken=True),
         'functions["main"].branches[0].taken must be a count'),
        (lambda d: d["functions"]["solve(int)"]["mpi"]["MPI_Allreduce"].update(calls="4"),
         'functions["solve(int)"].mpi["MPI_Allreduce"].calls must be a count'),
        (lambda d: d["functions"]["solve(int)"]["callpaths"]["main->solve(int)"].update(
            visits_terms="iters"),
         'functions["solve(int)"].callpaths["main->solve(int)"].visits_terms must be a list'),
        (lambda d: d["functions"]["main"].update(recursive="no"),
         'functions["main"].recursive must be true or false'),
        (lambda d: d["functions"]["main"].update(line=1.5),
         'functions["main"].line must be a line number'),
        (lambda d: d["parameters"]["n"].update(loops=None),
         'parameters["n"].loops must be a count'),
        (lambda d: d.update(batches=[["n"], "p"]), "batches[1] must be a list of names"),
        (lambda d: d.update(processes="2"), "processes must be a number of processes"),
        (lambda d: d["run"].update(point={"n": "8"}),
         "run.point must be an object of parameter values"),
        (lambda d: d["run"].pop("command"), "run has no 'command'"),
    ],
)  # fmt: skip
def test_every_malformed_part_is_refused_naming_the_file_and_key(
    tmp_path: Path, change: Any, where: str
) -> None:
    data = copy.deepcopy(WRITTEN)
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(InputError, match=re.escape(f"{path}: {where}")) as error:
        read_profile(path)
    assert str(error.value).endswith("write the profile again with perfcast taint")


def test_versions_are_checked(tmp_path: Path) -> None:
    newer = write(tmp_path, {**WRITTEN, "format": "perfcast-taint-profile/2"}, "newer.json")
    with pytest.raises(InputError, match=r"newer\.json: taint profile format version 2 is newer"):
        read_profile(newer)
    for found in ({**WRITTEN, "format": "perfcast-taint-profile/x"}, {"perfcast_models": 1}):
        with pytest.raises(InputError, match="not a perfcast taint profile"):
            read_profile(write(tmp_path, found, "other.json"))


def test_saving_replaces_only_an_earlier_profile(tmp_path: Path) -> None:
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n')
    with pytest.raises(InputError, match=r"notes\.json"):
        TaintProfile.from_json(WRITTEN).save(notes)
    assert notes.read_text() == '{"mine": true}\n'
    earlier = write(tmp_path, {**WRITTEN, "warnings": ["old"]}, "earlier.json")
    TaintProfile.from_json(WRITTEN).save(earlier)
    assert read_profile(earlier).warnings == ("a note",)


def test_match_prefers_the_call_path_then_the_function_then_a_pruned_callee() -> None:
    rows = [
        (callpath, "time", (n, p), float(n * p))
        for callpath in (
            "main",
            "main->solve",  # argument lists dropped by the measuring runtime
            "main->driver->solve(int)",  # a call site the taint run did not see
            "main->helper",  # pruned statically: constant per call, called in main's loop
            "main->log",  # unknown
        )
        for n in (1, 2, 4)
        for p in (1, 2, 4)
    ]
    data = copy.deepcopy(WRITTEN)
    data["parameters"].pop("iters")
    match = match_profile(TaintProfile.from_json(data), Experiment.from_rows(["n", "p"], rows))
    assert match.functions["main->solve"] == ["solve(int)"]
    assert match.priors["main->solve"].multiplicative == (frozenset({"n", "p"}),)
    assert match.by_function == ["main->driver->solve(int)"]
    assert match.priors["main->helper"] == Prior.constant("taint")  # main's own loops: iters
    assert match.unmatched == ["main->log"]
    assert match.dropped_parameters == []
