"""Property-based mutation of valid measurement files through every reader.

Seeds are valid files of each format: small ones written here (so the suite runs
anywhere) plus Extra-P's own examples where ``../shared/data/extrap-formats`` exists.
Each case mutates one seed (byte flips, insertions, truncation; for JSON-like formats
structural edits: a value replaced by another type, a huge or 5,000-digit number, NaN,
deep nesting, a key deleted or duplicated; for the text format token edits), optionally
names a ``format=`` that need not match, then runs format detection, ``read_experiment``
and, on what reads fine, a small ``PMNFModeler`` fit. The property: only
:class:`PerfcastError` escapes, a reader's message names the file, and nothing hangs
(hypothesis' deadline plus a ``signal.alarm`` guard, since a hang never returns to let
the deadline fire).

CI runs a few thousand cases; ``PERFCAST_FUZZ_EXAMPLES`` scales every test, and the
``long`` marker runs one large campaign. ``python3 tests/test_fuzz_readers.py N`` runs N
cases and counts distinct crash sites instead of failing (how the before/after numbers
of the hardening were measured).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fuzz_helpers import crash_site, time_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfcast
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.io import FORMATS, read_experiment
from perfcast.experiment.io.jsonfile import read_json
from perfcast.experiment.io.jsonlines import read_jsonlines
from perfcast.experiment.io.registry import detect_format
from perfcast.experiment.io.talpas import read_talpas
from perfcast.experiment.io.text import read_text
from perfcast.modeling.modeler import PMNFModeler

CASE_SECONDS = 10
"""signal.alarm guard per case: far above any real read of these small files."""
DEADLINE_MS = 5000
EXAMPLES = int(os.environ.get("PERFCAST_FUZZ_EXAMPLES", "0")) or None
"""Overrides the per-test example counts below (e.g. 20000 for a night run)."""
SEED_LIMIT_BYTES = 12_000
"""Extra-P seeds larger than this are skipped: mutations of big files test nothing new."""
MODELER = PMNFModeler(candidates=2, combinations=4, refine_structures=1)

SRC = Path(perfcast.__file__).resolve().parent
"""The perfcast under test (crash sites are named relative to it)."""


# -- seeds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    name: str
    kind: str
    """text, json, jsonl or talpas: which structural mutations apply."""
    suffix: str
    data: bytes


def _own_seeds() -> list[Seed]:
    """One small valid file per format and variant, two parameters, four points."""
    points = [(2, 10), (4, 10), (2, 20), (4, 20)]

    def value(p: int, n: int, rep: int) -> float:
        return 1.5 * p * n + 0.01 * rep

    text = ["PARAMETER p", "PARAMETER n"]
    text += ["POINTS " + " ".join(f"( {p} {n} )" for p, n in points)]
    for region in ("main", "main->solve"):
        text += [f"REGION {region}", "METRIC time"]
        text += ["DATA " + " ".join(repr(value(p, n, r)) for r in range(3)) for p, n in points]
    current = {
        "parameters": ["p", "n"],
        "units": {"time": "s"},
        "measurements": {
            cp: {
                "time": [
                    {"point": [p, n], "values": [value(p, n, r) for r in range(3)]}
                    for p, n in points
                ]
            }
            for cp in ("main", "main->solve")
        },
    }
    legacy = {
        "parameters": [{"id": 1, "name": "p"}, {"id": 2, "name": "n"}],
        "callpaths": [{"id": 1, "name": "main"}, {"id": 2, "name": "main->solve"}],
        "metrics": [{"id": 1, "name": "time"}],
        "coordinates": [
            {
                "id": i,
                "parameter_value_pairs": [
                    {"parameter_id": 1, "parameter_value": p},
                    {"parameter_id": 2, "parameter_value": n},
                ],
            }
            for i, (p, n) in enumerate(points, start=1)
        ],
        "measurements": [
            {"coordinate_id": i, "callpath_id": c, "metric_id": 1, "value": value(p, n, 0)}
            for i, (p, n) in enumerate(points, start=1)
            for c in (1, 2)
        ],
    }
    jsonl = [
        json.dumps(
            {"params": {"p": p, "n": n}, "callpath": cp, "metric": "time", "value": value(p, n, r)}
        )
        for cp in ("main", "main->solve")
        for p, n in points
        for r in range(2)
    ]
    jsonl.append(json.dumps({"params": {"p": 2, "n": 10}, "metric": "time", "value": [1.0, 1.1]}))
    talpas = [
        f'{{"parameters":{{"p":{p},"n":{n}}};"metric":"time";"callpath":"{cp}";'
        f'"value":{value(p, n, r)}}}'
        for cp in ("main", "main->solve")
        for p, n in points
        for r in range(2)
    ]
    return [
        Seed("own.txt", "text", ".txt", "\n".join(text).encode() + b"\n"),
        Seed("own-current.json", "json", ".json", json.dumps(current, indent=1).encode()),
        Seed("own-legacy.json", "json", ".json", json.dumps(legacy, indent=1).encode()),
        Seed("own.jsonl", "jsonl", ".jsonl", "\n".join(jsonl).encode() + b"\n"),
        Seed("own-talpas.txt", "talpas", ".txt", "\n".join(talpas).encode() + b"\n"),
    ]


def _extrap_seeds(root: Path) -> list[Seed]:
    kinds = {"json": "json", "jsonlines": "jsonl", "talpas": "talpas", "text": "text"}
    seeds = []
    for folder, kind in kinds.items():
        for file in sorted((root / folder).rglob("*")):
            if file.is_file() and file.stat().st_size <= SEED_LIMIT_BYTES:
                name = str(file.relative_to(root))
                seeds.append(Seed(name, kind, file.suffix.lower(), file.read_bytes()))
    return seeds


def all_seeds() -> list[Seed]:
    root = Path(__file__).resolve().parents[2] / "shared" / "data" / "extrap-formats"
    return _own_seeds() + (_extrap_seeds(root) if root.is_dir() else [])


SEEDS = all_seeds()


# -- mutations ------------------------------------------------------------------------------


class Raw(str):
    """JSON text inserted verbatim (5,000-digit numbers, deep nesting, NaN)."""


class Pairs(list):
    """A JSON object as its (key, value) pairs, so keys can be duplicated."""


def dump(node: object) -> str:
    """JSON text of a mutated document: Raw verbatim, Pairs with any duplicate keys."""
    if isinstance(node, Raw):
        return str(node)
    if isinstance(node, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in node) + "}"
    if isinstance(node, list | tuple):
        return "[" + ",".join(dump(v) for v in node) + "]"
    return json.dumps(node)


def load(text: str) -> object:
    """A seed's JSON with objects as Pairs, ready for :func:`json_edit`."""
    return json.loads(text, object_pairs_hook=Pairs)


def locations(node: object, limit: int = 400) -> list[tuple[list[Any], int]]:
    """(container, key) of every value below ``node``, breadth first, at most ``limit``."""
    found: list[tuple[list[Any], int]] = []
    queue = [node]
    while queue and len(found) < limit:
        current = queue.pop(0)
        if isinstance(current, Pairs):
            for index, (_, value) in enumerate(current):
                found.append((current, index))
                queue.append(value)
        elif isinstance(current, list):
            for index, value in enumerate(current):
                found.append((current, index))
                queue.append(value)
    return found


hostile_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**400, -(10**400), 2**63, 2**64 + 1, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(
        [
            Raw("9" * 5000),
            Raw("1" + "0" * 400 + ".5"),
            Raw("1e400"),
            Raw("-1e-400"),
            Raw("NaN"),
            Raw("Infinity"),
            Raw("-Infinity"),
            Raw("[" * 50_000 + "]" * 50_000),
            Raw('{"a":' * 20_000 + "1" + "}" * 20_000),
        ]
    ),
)
hostile_values = st.recursive(
    hostile_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(st.tuples(st.text(max_size=5), inner), max_size=3).map(Pairs),
    ),
    max_leaves=6,
)


@st.composite
def json_edit(draw: st.DrawFn, document: object) -> object:
    """``document`` after 1-3 structural edits in place."""
    for _ in range(draw(st.integers(1, 3))):
        spots = locations(document)
        if not spots:
            break
        container, index = draw(st.sampled_from(spots))
        operation = draw(st.sampled_from(["replace", "delete", "duplicate", "wrap"]))
        if isinstance(container, Pairs):
            key, old = container[index]
            if operation == "replace":
                container[index] = (key, draw(hostile_values))
            elif operation == "delete":
                del container[index]
            elif operation == "duplicate":
                container.insert(index, (key, draw(hostile_values)))
            else:
                container[index] = (key, [old])
        else:
            assert isinstance(container, list)
            if operation == "replace":
                container[index] = draw(hostile_values)
            elif operation == "delete":
                del container[index]
            elif operation == "duplicate":
                container.insert(index, container[index])
            else:
                container[index] = Pairs([("value", container[index])])
    return document


@st.composite
def structural(draw: st.DrawFn, seed: Seed) -> bytes:
    """Structural edits for the seed's kind; line-based kinds edit 1-2 lines."""
    text = seed.data.decode("utf-8")
    if seed.kind == "json":
        return dump(draw(json_edit(load(text)))).encode()
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 2))):
        number = draw(st.integers(0, len(lines) - 1))
        line = lines[number]
        if seed.kind == "text":
            tokens = line.split() or [""]
            position = draw(st.integers(0, len(tokens) - 1))
            tokens[position] = draw(
                st.one_of(
                    st.sampled_from(
                        ["nan", "inf", "-inf", "9" * 5000, "1e400", "(", ")", "", "DATA", "ü"]
                    ),
                    st.text(max_size=8),
                )
            )
            lines[number] = " ".join(tokens)
        else:
            try:
                record = load(line.replace(";", ",") if seed.kind == "talpas" else line)
            except (ValueError, RecursionError):  # a line an earlier edit already broke
                continue
            edited = draw(json_edit(record))
            if seed.kind == "talpas" and isinstance(edited, Pairs):
                # Talpas separates the record's own fields with ';' again.
                fields = [f"{json.dumps(k)}:{dump(v)}" for k, v in edited]
                lines[number] = "{" + ";".join(fields) + "}"
            else:
                lines[number] = dump(edited)
        if draw(st.booleans()):
            lines.insert(number, lines[number])
    return ("\n".join(lines) + "\n").encode()


@st.composite
def byte_level(draw: st.DrawFn, seed: Seed) -> bytes:
    """The seed truncated, or with bytes flipped, inserted or deleted (up to 8 places)."""
    data = bytearray(seed.data)
    operation = draw(st.sampled_from(["flip", "insert", "truncate", "delete"]))
    if operation == "truncate":
        return bytes(data[: draw(st.integers(0, len(data)))])
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if operation == "flip" and data:
            data[position] = draw(st.integers(0, 255))
        elif operation == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[position : position + draw(st.integers(1, 16))]
    return bytes(data)


formats = st.one_of(st.none(), st.none(), st.sampled_from(FORMATS))


@dataclass(frozen=True)
class Case:
    seed: Seed
    data: bytes
    format: str | None


@st.composite
def cases(draw: st.DrawFn, kinds: tuple[str, ...], mutation: str) -> Case:
    seed = draw(st.sampled_from([s for s in SEEDS if s.kind in kinds]))
    mutate = structural if mutation == "structural" else byte_level
    return Case(seed, draw(mutate(seed)), draw(formats))


# -- running one case -----------------------------------------------------------------------


def run_case(case: Case, directory: Path) -> str:
    """Detect, read and fit one mutated file; only PerfcastErrors naming it may escape.

    Returns how far the case got, for the census.
    """
    path = directory / f"case{case.seed.suffix}"
    path.write_bytes(case.data)
    with time_limit(CASE_SECONDS):
        try:
            detect_format(path)
        except PerfcastError as error:
            assert str(path) in str(error), f"message does not name the file: {error}"
        try:
            result = read_experiment(path, case.format)
        except PerfcastError as error:
            assert str(path) in str(error), f"message does not name the file: {error}"
            return "refused by the reader"
        try:
            MODELER.fit(result)
        except PerfcastError:
            return "read, fit refused"  # e.g. too few points: a message, as it should be
        return "read and fitted"


# -- the properties -------------------------------------------------------------------------

COMMON = settings(
    deadline=DEADLINE_MS,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
"""Parent of every test's settings below."""
WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-")


@pytest.mark.slow
@settings(COMMON, max_examples=EXAMPLES or 1200)
@given(cases(("json", "jsonl", "talpas"), "structural"))
def test_json_like_structural_mutations_raise_only_perfcast_errors(case: Case) -> None:
    run_case(case, Path(WORKDIR.name))


@pytest.mark.slow
@settings(COMMON, max_examples=EXAMPLES or 400)
@given(cases(("text",), "structural"))
def test_text_token_mutations_raise_only_perfcast_errors(case: Case) -> None:
    run_case(case, Path(WORKDIR.name))


@pytest.mark.slow
@settings(COMMON, max_examples=EXAMPLES or 1400)
@given(cases(("text", "json", "jsonl", "talpas"), "bytes"))
def test_byte_mutations_raise_only_perfcast_errors(case: Case) -> None:
    run_case(case, Path(WORKDIR.name))


@pytest.mark.long
@settings(COMMON, max_examples=EXAMPLES or 20_000)
@given(
    st.one_of(
        cases(("json", "jsonl", "talpas", "text"), "structural"),
        cases(("json", "jsonl", "talpas", "text"), "bytes"),
    )
)
def test_long_campaign_raises_only_perfcast_errors(case: Case) -> None:
    run_case(case, Path(WORKDIR.name))


# -- the hand-made classes of the report, one regression test each ---------------------------


def current_json(point: object = (4,), values: object = (1.5,), parameters: object = ("p",)) -> str:
    """A current-form JSON document with one measurement, any part replaceable."""
    entry = Pairs([("point", point), ("values", values)])
    measurements = Pairs([("main", Pairs([("time", [entry])]))])
    return dump(Pairs([("parameters", parameters), ("measurements", measurements)]))


def refuses(path: Path, match: str, format: str | None = None) -> InputError:
    """read_experiment's InputError, which must name ``path`` and match ``match``."""
    with time_limit(CASE_SECONDS), pytest.raises(InputError, match=match) as error:
        read_experiment(path, format)
    assert error.value.path == path
    return error.value


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ([[4]], r"measurements\['main'\]\['time'\]\[0\]: value of parameter 'p' is a list of 1"),
        ([{"a": 1}], r"value of parameter 'p' is an object"),
        ([True], r"value of parameter 'p' is true, not a number"),
        ([None], r"value of parameter 'p' is null"),
        ([Raw("1" + "0" * 400)], "an integer of 401 digits is too large"),
        (
            [Raw("1" + "0" * 350)],
            r"value of parameter 'p' is an integer of about 351 digits; only finite",
        ),
        ([Raw("1e400")], r"value of parameter 'p' is inf; only finite"),
        ([Raw("NaN")], "NaN is not a measured value or coordinate"),
        (["four"], r"value of parameter 'p' 'four' is not a number"),
    ],
)
def test_hostile_coordinates_are_input_errors(tmp_path, point, message):
    path = tmp_path / "m.json"
    path.write_text(current_json(point=point))
    refuses(path, message)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([Raw("9" * 5000)], r"m.json:1: an integer of 5000 digits"),
        ([Raw("1" + "0" * 350)], "measured value is an integer of about 351 digits"),
        ([Raw("-Infinity")], "-Infinity is not a measured value"),
        ([[1.0, [2.0]]], r"measured value is a list of 2, not a number"),
        ([False], "measured value is false, not a number"),
        ([], "a measurement has no values"),
    ],
)
def test_hostile_values_are_input_errors(tmp_path, values, message):
    path = tmp_path / "m.json"
    path.write_text(current_json(values=values))
    refuses(path, message)


def test_empty_or_non_text_parameter_lists_are_input_errors(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(current_json(point=[], parameters=[]))
    refuses(path, "no parameters are declared")
    path.write_text(current_json(parameters=[["p"]]))
    refuses(path, r"parameters\[0\]: parameter name is a list of 1; names are text")
    records = tmp_path / "m.jsonl"
    records.write_text('{"params": {}, "value": 1}\n')
    refuses(records, "no parameters are declared")


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deep_nesting_is_an_input_error_in_detection_and_reading(tmp_path, depth):
    nested = "[" * depth + "]" * depth
    for name, text in [
        ("deep.json", current_json(values=Raw(nested))),
        ("deep.jsonl", '{"params": {"p": 1}, "value": ' + nested + "}\n"),
        ("deep.txt", '{"parameters":{"p":1};"callpath":"c";"metric":"m";"value":' + nested + "}\n"),
        ("deep.dat", nested + "\n"),
    ]:
        path = tmp_path / name
        path.write_text(text)
        with time_limit(CASE_SECONDS):
            try:
                detect_format(path)
            except InputError as error:  # undetectable is fine, a RecursionError is not
                assert error.path == path
        refuses(path, "nested too deeply|cannot tell the file format|is a list|unknown keyword")


def test_legacy_json_ids_must_be_integers_and_lists_lists(tmp_path):
    legacy = load(SEEDS[2].data.decode())
    assert isinstance(legacy, Pairs) and SEEDS[2].name == "own-legacy.json"
    path = tmp_path / "legacy.json"
    cases = {
        ("measurements", 0, "callpath_id"): ([1], r"measurements\[0\] has the id a list of 1; ids"),
        ("measurements", 0, "metric_id"): ("1", r"measurements\[0\] has the id '1'; ids are"),
        ("coordinates", 0, "parameter_value_pairs"): (7, "must be a list, not 7"),
        ("coordinates", 0, "parameter_value_pairs", 0, "parameter_id"): (
            {"x": 1},
            "has the id an object",
        ),
        ("callpaths",): ({"id": 1}, r'"callpaths" must be a list, not an object'),
        ("callpaths", 0, "name"): (None, "name is null; names are text"),
    }
    for location, (value, message) in cases.items():
        document = load(SEEDS[2].data.decode())
        container = document
        for step in location[:-1]:
            if isinstance(container, Pairs):
                container = dict(container)[step]
            else:
                assert isinstance(container, list) and isinstance(step, int)
                container = container[step]
        last = location[-1]
        if isinstance(container, Pairs):
            index = [k for k, _ in container].index(last)
            container[index] = (last, value)
        else:
            assert isinstance(container, list) and isinstance(last, int)
            container[last] = value
        path.write_text(dump(document))
        refuses(path, message)


def test_integer_callpath_names_in_legacy_json_are_read_as_text(tmp_path):
    document = json.loads(SEEDS[2].data)
    document["callpaths"][1]["name"] = 17
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(document))
    assert read_experiment(path).callpaths == ["main", "17"]


def test_units_must_map_metrics_to_text(tmp_path):
    document = json.loads(SEEDS[1].data)
    document["units"] = {"time": ["s"]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(document))
    refuses(path, '"units" must map metric names to unit text')


@pytest.mark.parametrize(
    ("name", "record", "message"),
    [
        ("m.jsonl", '{"params": {"p": 4}, "value": NaN}', r"m.jsonl:2: NaN is not a measured"),
        ("m.jsonl", '{"params": {"p": [4]}, "value": 1}', r"m.jsonl:2: value of parameter 'p'"),
        ("m.jsonl", '{"params": {"p": 4}, "value": 1e999}', r"m.jsonl:2: measured value is inf"),
        ("m.jsonl", '{"params": {"p": 4}, "callpath": ["a"], "value": 1}', r"'callpath' is a list"),
        ("m.jsonl", '{"params": {"p": 4}, "metric": {}, "value": 1}', r"'metric' is an object"),
        (
            "m.txt",
            '{"parameters":{"p":4};"callpath":"c";"metric":"m";"value":true}',
            r"m.txt:2: measured value is true",
        ),
        (
            "m.txt",
            '{"parameters":{"p":4};"callpath":"c";"metric":"m";"value":' + "7" * 4400 + "}",
            r"m.txt:2: an integer of 4400 digits",
        ),
        (
            "m.txt",
            '{"parameters":{"p":4};"callpath":"c";"metric":"m";"value":1',
            r"m.txt:2: not a Talpas record",
        ),
    ],
    ids=[
        "jsonl-nan",
        "jsonl-list-coordinate",
        "jsonl-overflow",
        "jsonl-list-callpath",
        "jsonl-object-metric",
        "talpas-boolean",
        "talpas-4400-digits",
        "talpas-syntax",
    ],
)
def test_json_lines_and_talpas_name_the_line(tmp_path, name, record, message):
    path = tmp_path / name
    first = (
        '{"params": {"p": 2}, "value": 1}'
        if name.endswith(".jsonl")
        else '{"parameters":{"p":2};"callpath":"c";"metric":"m";"value":1}'
    )
    path.write_text(first + "\n" + record + "\n")
    refuses(path, message, "jsonl" if name.endswith(".jsonl") else "talpas")


@pytest.mark.parametrize("seed", [s for s in _own_seeds()], ids=lambda s: s.name)
@pytest.mark.parametrize("format", FORMATS)
def test_any_format_named_for_any_file_is_read_or_refused_with_the_file(tmp_path, seed, format):
    path = tmp_path / f"seed{seed.suffix}"
    path.write_bytes(seed.data)
    try:
        with time_limit(CASE_SECONDS):
            read_experiment(path, format)
    except PerfcastError as error:
        assert str(path) in str(error)


@pytest.mark.parametrize("seed", _own_seeds(), ids=lambda s: s.name)
def test_files_that_are_not_utf8_are_refused_with_the_line(tmp_path, seed):
    path = tmp_path / f"latin1{seed.suffix}"
    lines = seed.data.split(b"\n")
    lines[2] += b"\xe9"
    path.write_bytes(b"\n".join(lines))
    error = refuses(path, r"not a measurement file: not UTF-8 text \(byte 0xe9\)")
    assert error.line == 3


@pytest.mark.parametrize("format", [None, "text", "json", "jsonl", "talpas", "sqlite"])
def test_named_pipes_are_refused_without_blocking(tmp_path, format):
    pipe = tmp_path / "measurements.json"
    os.mkfifo(pipe)
    refuses(pipe, "not a regular file", format)
    for reader in (read_text, read_json, read_jsonlines, read_talpas):
        with time_limit(CASE_SECONDS), pytest.raises(InputError, match="not a regular file"):
            reader(pipe)


def test_devices_and_directories_given_as_files_are_refused(tmp_path):
    refuses(Path("/dev/zero"), "not a regular file", "jsonl")
    for reader in (read_text, read_json, read_jsonlines, read_talpas):
        with pytest.raises(InputError, match=r"\(a directory\), so not a measurement file"):
            reader(tmp_path)


# -- Cube sets: every metric, and no run directory dropped unsaid ---------------------------


def cube_set(root: Path, formats_dir: Path, runs: dict[str, int]) -> Path:
    """A set of run directories with ``n`` links to a real Score-P profile each."""
    profile = formats_dir / "cubeset/single_parameter/mm.x10y1z1.r1/profile.cubex"
    for run, profiles in runs.items():
        (root / run).mkdir()
        for index in range(profiles):
            (root / run / f"profile{index}.cubex").symlink_to(profile)
    return root


def test_cube_sets_read_every_metric_by_default(formats_dir):
    experiment = read_experiment(formats_dir / "cubeset/multi_parameter")
    assert {"time", "visits", "min_time", "max_time", "PAPI_FP_OPS"} <= set(experiment.metrics)
    assert experiment.metrics["min_time"].unit == "s"
    assert experiment.restricted(metrics=["min_time"]).select("main").shape[0] > 0


def test_cube_metrics_not_in_the_profiles_name_what_they_hold(tmp_path, formats_dir):
    root = cube_set(tmp_path, formats_dir, {"mm.x1.r1": 1, "mm.x2.r1": 1})
    for metrics in (["bytes_sent"], ["time", "bytes_sent"]):
        with pytest.raises(
            InputError, match=r"no values of the metric\(s\) \['bytes_sent'\]"
        ) as error:
            read_experiment(root, metrics=metrics)
        assert error.value.path == root
        assert "'PAPI_FP_OPS'" in error.value.reason  # what the profiles do have


def test_cube_run_directories_without_profiles_are_named(tmp_path, formats_dir):
    root = cube_set(tmp_path, formats_dir, {"mm.x1.r1": 1, "mm.x2.r1": 1, "mm.x4.r1": 0})
    (root / "mm.x4.r1" / "scorep.cfg").write_text("ENABLE_PROFILING=true\n")
    with pytest.warns(UserWarning, match=r"mm\.x4\.r1: no Cube profile .* left out of the model"):
        experiment = read_experiment(root)
    assert sorted(experiment.coordinates()[:, 0]) == [1, 2]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads directories without permission")
def test_unreadable_cube_run_directories_are_errors(tmp_path, formats_dir):
    root = cube_set(tmp_path, formats_dir, {"mm.x1.r1": 1, "mm.x2.r1": 1, "mm.x4.r1": 1})
    (root / "mm.x4.r1").chmod(0)
    try:
        with pytest.raises(InputError, match=r"cannot read the run directory") as error:
            read_experiment(root)
        assert error.value.path == root / "mm.x4.r1"
    finally:
        (root / "mm.x4.r1").chmod(0o755)


# -- census: count crash sites instead of failing -------------------------------------------


def census(examples: int) -> tuple[Counter[str], Counter[str]]:
    """Run ``examples`` cases of every family; count outcomes, and cases per distinct
    crash site."""
    sites: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    families = [
        cases(("json", "jsonl", "talpas"), "structural"),
        cases(("text",), "structural"),
        cases(("text", "json", "jsonl", "talpas"), "bytes"),
    ]
    for family in families:

        @settings(COMMON, max_examples=examples // len(families))
        @given(family)
        def probe(case: Case) -> None:
            try:
                outcomes[run_case(case, Path(WORKDIR.name))] += 1
            except Exception as error:  # counting, not judging: every kind is a site
                outcomes["crashed"] += 1
                sites[crash_site(error)] += 1

        probe()
    return outcomes, sites


if __name__ == "__main__":
    seen, found = census(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
    print(f"{seen.total()} cases: " + ", ".join(f"{n} {o}" for o, n in seen.most_common()))
    print(f"{sum(found.values())} crashes at {len(found)} distinct sites")
    for site, count in found.most_common():
        print(f"{count:6d}  {site}")
