"""The lowest-layer helpers every stage reads through: file text and JSON
(:mod:`perfcast.inputs`), optional libraries (:func:`perfcast.lazy.optional_module`) and the
lines of a design (:mod:`perfcast.modeling.lines`).

Each stage's own tests check its messages end to end; these pin what the stages rely on
the helpers for: that nothing blocks, that errors name the file, line, key and remedy, and
that a line of the design means the same to the noise test and to both modelers.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from perfcast.errors import InputError, PerfcastError
from perfcast.inputs import JsonChecker, decode_text, read_json, read_text
from perfcast.lazy import optional_module
from perfcast.modeling.lines import batched_lines, lines_along

HINT = "write one with perfcast test"


def test_text_is_read_and_every_failure_names_the_file_and_remedy(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("a\nb\n")
    assert read_text(good, "test file", HINT) == "a\nb\n"
    with pytest.raises(InputError, match=f"missing.txt: no such test file; {HINT}"):
        read_text(tmp_path / "missing.txt", "test file", HINT)
    with pytest.raises(InputError, match=r"is not a regular file \(a directory\), so not a test"):
        read_text(tmp_path, "test file", HINT)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"a\nb\nc\xe9\n")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xe9\); write one") as error:
        read_text(latin1, "test file", HINT)
    assert error.value.line == 3


def test_a_named_pipe_is_refused_before_it_is_opened(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # opening it to read would block until a writer appears
    with pytest.raises(InputError, match=r"\(a named pipe, socket or device\), so not a test"):
        read_json(pipe, "test file", HINT)


def test_the_line_of_a_bad_byte_counts_from_the_first_line_given():
    assert decode_text(b"ok", "f", "test file", HINT, first_line=7) == "ok"
    with pytest.raises(InputError) as error:
        decode_text(b"x\n\xff", "f", "test file", HINT, first_line=7)
    assert error.value.line == 8


def test_json_errors_carry_the_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n "a": 1,\n}')
    with pytest.raises(InputError, match="not JSON") as error:
        read_json(path, "test file", HINT)
    assert error.value.line == 3


def test_the_json_checker_names_the_key_and_refuses_booleans_as_integers():
    check = JsonChecker("f.json", HINT)
    assert check.integer(3, "a.count") == 3
    with pytest.raises(InputError, match=f"a.count must be an integer; {HINT}"):
        check.integer(True, "a.count")
    with pytest.raises(InputError, match=f"a has no 'line'; {HINT}"):
        check.required({"kind": "for"}, "line", "a")
    assert check.texts(["x", "y"], "a.names") == ("x", "y")
    with pytest.raises(InputError, match=r"a\.names must be a list of names"):
        check.texts(["x", 1], "a.names", "a list of names")


def test_a_missing_optional_library_says_who_needs_it_and_how_to_install():
    assert optional_module("json", "the test needs json").dumps([]) == "[]"
    with pytest.raises(PerfcastError, match=r"the test needs it: pip install 'perfcast\[static\]'"):
        optional_module("perfcast_not_a_module", "the test needs it")


def test_lines_are_the_points_equal_in_every_other_parameter_sorted_along_one():
    rng = np.random.default_rng(0)
    coordinates = rng.integers(1, 4, size=(40, 3)).astype(float)
    for index in range(3):
        lines = lines_along(coordinates, index)
        assert sorted(np.concatenate(lines).tolist()) == list(range(40))
        others = np.delete(coordinates, index, axis=1)
        for members in lines:
            assert (others[members] == others[members[0]]).all()
            assert (np.diff(coordinates[members, index]) >= 0).all()
        assert len({others[m[0]].tobytes() for m in lines}) == len(lines)


def test_lines_with_the_same_values_are_batched_and_the_filter_applies():
    # p along rows, n fixed per line: n=1 and n=2 share x = (2, 4, 8); n=3 has only (2, 4)
    coordinates = np.array(
        [[2, 1], [4, 1], [8, 1], [2, 2], [4, 2], [8, 2], [2, 3], [4, 3]], dtype=float
    )
    batches = batched_lines(coordinates, 0, lambda x: len(x) >= 2)
    assert [x.tolist() for x, _ in batches] == [[2, 4, 8], [2, 4]]
    assert batches[0][1].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert [x.tolist() for x, _ in batched_lines(coordinates, 0, lambda x: len(x) >= 3)] == [
        [2, 4, 8]
    ]
