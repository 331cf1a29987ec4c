"""The static model's summary as a typed contract: read once, versioned, every formula
parsed on read, every malformed part refused naming the file and the key."""

from __future__ import annotations

import copy
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from perfcast.errors import InputError
from perfcast.static.summary import FORMAT, parse_formula, read_static_summary

WRITTEN: dict[str, Any] = {
    "format": FORMAT,
    "source": "kernels.c",
    "binary": "kernels",
    "architecture": {"name": "x86_64"},
    "functions": [
        {
            "name": "dgemm",
            "source_function": "dgemm",
            "location": "kernels.c:3",
            "binary_symbol": "dgemm",
            "inlined_into": None,
            "parameters": {"n": "argument n"},
            "counts": {"fp_mul": "n^3", "load": "2 * n^3 + 0.5 * n^2"},
            "fp_instructions": "2 * n^3",
            "instructions": "6 * n^3 + 0.5 * n^2 - 3",
            "calls": [],
            "external_calls": [],
            "warnings": [],
        }
    ],
    "skipped": [{"function": "helper", "reason": "no loops"}],
    "warnings": ["a note"],
}
"""A summary as ``perfcast static -o model.py`` writes it beside the module."""


def write(directory: Path, data: Any, name: str = "model.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(data))
    return path


def test_a_written_summary_reads_with_its_formulas(tmp_path: Path) -> None:
    write(tmp_path, WRITTEN)
    summary = read_static_summary(tmp_path / "model.py")  # the module names its summary
    dgemm = summary.function("dgemm")
    assert dgemm.formula().terms == {
        (("n", 3),): Fraction(6),
        (("n", 2),): Fraction(1, 2),
        (): Fraction(-3),
    }
    assert dgemm.formula("fp_mul").terms == {(("n", 3),): Fraction(1)}
    assert dgemm.parameters == {"n": "argument n"} and dgemm.location == "kernels.c:3"
    assert summary.skipped == {"helper": "no loops"} and summary.warnings == ("a note",)
    with pytest.raises(InputError, match=r"no function 'other'; it has \['dgemm'\]"):
        summary.function("other")
    with pytest.raises(InputError, match="has no count 'fp_div'; use instructions"):
        dgemm.formula("fp_div")


def test_a_summary_without_a_format_is_version_1(tmp_path: Path) -> None:
    data = {key: value for key, value in WRITTEN.items() if key != "format"}
    assert list(read_static_summary(write(tmp_path, data)).functions) == ["dgemm"]


def test_versions_are_checked(tmp_path: Path) -> None:
    newer = write(tmp_path, {**WRITTEN, "format": "perfcast-static-summary/2"})
    with pytest.raises(InputError, match="static summary format version 2 is newer"):
        read_static_summary(newer)
    other = write(tmp_path, {**WRITTEN, "format": "perfcast-taint-profile/1"})
    with pytest.raises(InputError, match=r"not a static model summary \(format 'perfcast-taint"):
        read_static_summary(other)
    with pytest.raises(InputError, match=r"not a static model summary \(no 'functions' list"):
        read_static_summary(write(tmp_path, {"perfcast_models": 1}))


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["functions"][0]["counts"].update(load="2 * n^x"),
         "functions[0].counts[\"load\"]: cannot read the static formula '2 * n^x'"),
        (lambda d: d["functions"][0].update(instructions="n * (m + 1)"),
         "functions[0].instructions: cannot read the static formula"),
        (lambda d: d["functions"][0].update(fp_instructions=3), "functions[0].fp_instructions "
         "must be a string"),
        (lambda d: d["functions"][0].pop("instructions"), "functions[0] has no 'instructions'"),
        (lambda d: d["functions"][0].update(name=["dgemm"]), "functions[0].name must be a string"),
        (lambda d: d["functions"][0]["parameters"].update(n=1),
         'functions[0].parameters["n"] must be a string'),
        (lambda d: d.update(functions={"dgemm": {}}), "functions must be a list of functions"),
        (lambda d: d["skipped"][0].pop("reason"), "skipped[0].reason must be a string"),
        (lambda d: d.update(warnings="x"), "warnings must be a list of strings"),
    ],
)  # fmt: skip
def test_every_malformed_part_is_refused_naming_the_file_and_key(
    tmp_path: Path, change: Any, where: str
) -> None:
    data = copy.deepcopy(WRITTEN)
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(InputError, match=re.escape(f"{path}: {where}")) as error:
        read_static_summary(path)
    assert str(error.value).endswith("-o model.py` (and model.json)")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such static model summary; write one with `perfcast static"),
        (b"{not json", "not JSON: Expecting property name"),
        (b'{"functions": "\xe9"}', "not UTF-8 text (byte 0xe9"),
        (b'{"functions": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
)
def test_files_that_are_not_summaries_are_refused(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    path = tmp_path / "model.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(words)):
        read_static_summary(path)


def test_formulas_read_back_as_written() -> None:
    assert parse_formula("n^2 - n").terms == {(("n", 2),): Fraction(1), (("n", 1),): -1}
    assert parse_formula("0.5 * n * m + 4").terms == {
        (("m", 1), ("n", 1)): Fraction(1, 2),
        (): Fraction(4),
    }
    assert parse_formula("0").terms == {}
    for bad in ("1/0 * n", "n^-1"):
        with pytest.raises(InputError, match="cannot read the static formula"):
            parse_formula(bad)
