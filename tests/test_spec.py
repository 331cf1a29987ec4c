"""perfcast.toml: parsing, ranges, and errors that name the key and the line."""

import textwrap

import pytest

from perfcast.appspec import KeyLines, expand, load_spec, parse_spec
from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.measure.campaign import perfcast_build_prefix

GOOD = """\
[app]
name = "stencil"

[build]
sources = ["a.c", "b.c"]
output = "app"
counters = true

[run]
command = "./app {size} {iterations}"
repetitions = 2
timeout = 30

[parameters]
p = [4, 1, 2]
size = { start = 64, stop = 256, factor = 2 }
n = { start = 10, stop = 30, step = 10 }
iterations = 20

[design]
kind = "lines"
base = { p = 2 }
"""


def spec_error(text: str, tmp_path) -> InputError:
    path = tmp_path / "perfcast.toml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(InputError) as info:
        load_spec(path)
    return info.value


def test_valid_spec(tmp_path):
    path = tmp_path / "perfcast.toml"
    path.write_text(GOOD.replace("{iterations}", "{iterations} {n}"))
    spec = load_spec(path)
    assert spec.name == "stencil"
    assert spec.store == tmp_path / "stencil.sqlite"
    assert spec.directory == tmp_path
    assert [p.name for p in spec.parameters] == ["p", "size", "n", "iterations"]
    assert spec.parameter("p").values == (1, 2, 4)
    assert spec.parameter("size").values == (64, 128, 256)
    assert spec.parameter("n").values == (10, 20, 30)
    assert spec.varied == ["p", "size", "n"]
    assert spec.fixed == {"iterations": 20}
    assert spec.build is not None and spec.build.counters and spec.build.sources == ("a.c", "b.c")
    assert spec.run.repetitions == 2 and spec.run.timeout == 30
    assert spec.design.kind == "lines" and spec.design.base == {"p": 2}
    assert expand(spec.run.command, {"size": 64, "iterations": 20, "n": 1.5}) == "./app 64 20 1.5"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        # a typo in a key: named, with the line and a suggestion
        (
            '[run]\ncommand = "./a {n}"\nrepetiton = 3\n[parameters]\nn = [1, 2]\n',
            3,
            ["run.repetiton", "did you mean 'repetitions'"],
        ),
        # wrong type
        (
            '[run]\ncommand = "./a {n}"\ntimeout = "long"\n[parameters]\nn = [1, 2]\n',
            3,
            ["run.timeout", "must be a number"],
        ),
        # unknown placeholder
        (
            '[parameters]\nn = [1, 2]\n\n[run]\ncommand = "./a {m} {n}"\n',
            5,
            ["run.command", "unknown placeholder {m}"],
        ),
        # a varied parameter the command never uses
        (
            '[parameters]\nn = [1, 2]\nm = [3, 4]\n[run]\ncommand = "./a {n}"\n',
            5,
            ["run.command", "'m' varies"],
        ),
        # non-positive value, in an inline range table
        (
            '[run]\ncommand = "./a {n}"\n[parameters]\n\nn = { start = 0, stop = 4, step = 1 }\n',
            5,
            ["parameters.n", "positive"],
        ),
        # range with both step and factor
        (
            '[run]\ncommand = "./a {n}"\n[parameters]\nn = { start = 1, stop = 4, step = 1, '
            "factor = 2 }\n",
            4,
            ["parameters.n", "exactly one of step"],
        ),
        # a list with a string in it, spread over lines
        (
            '[run]\ncommand = "./a {n}"\n[parameters]\nn = [\n  1,\n  "2",\n]\n',
            4,
            ["parameters.n", "'2' is a string"],
        ),
        # fractional rank count
        ('[run]\ncommand = "./a"\n[parameters]\np = [1, 2.5]\n', 4, ["parameters.p", "whole"]),
        # unknown design
        (
            '[run]\ncommand = "./a {n}"\n[parameters]\nn = [1, 2]\n[design]\nkind = "grid"\n',
            6,
            ["design.kind", "unknown design 'grid'"],
        ),
        # base value that is not among the parameter's values
        (
            '[run]\ncommand = "./a {n}"\n[parameters]\nn = [1, 2]\n[design]\nkind = "lines"\n'
            "base = { n = 3 }\n",
            7,
            ["design.base.n", "not one of the values"],
        ),
        # build with neither sources nor command
        (
            '[build]\ncompiler = "mpicc"\n[run]\ncommand = "./a {n}"\n[parameters]\nn = [1, 2]\n',
            1,
            ["[build] needs sources"],
        ),
        # nothing varies
        ('[run]\ncommand = "./a {n}"\n[parameters]\nn = 1\n', 3, ["no parameter varies"]),
        # unknown table
        (
            '[run]\ncommand = "./a {n}"\n[parameters]\nn = [1, 2]\n[runs]\nx = 1\n',
            5,
            ["unknown key 'runs'", "did you mean 'run'"],
        ),
        # TOML syntax errors: tomllib's line, or the last line for an unclosed value
        ('[run]\ncommand = "./a {n}"\n[parameters]\nn = = 2\nm = 1\n', 4, ["not valid TOML"]),
        ('[run]\ncommand = "./a {n}"\n[parameters]\nn = [1, 2\n', 4, ["end of the file"]),
    ],
)
def test_errors_name_key_and_line(tmp_path, text, line, words):
    error = spec_error(text, tmp_path)
    assert error.line == line, str(error)
    assert error.path == tmp_path / "perfcast.toml"
    message = str(error)
    assert message.startswith(f"{tmp_path / 'perfcast.toml'}:{line}: ")
    for word in words:
        assert word in message


def test_missing_file_suggests_init(tmp_path):
    with pytest.raises(InputError, match="perfcast init"):
        load_spec(tmp_path / "nope.toml")


def test_key_lines_handles_tables_dotted_and_multiline_values():
    lines = KeyLines(
        'a = 1\ns = """\nb = 2\n"""\n[t]\nlist = [\n  1,\n]\nx.y = 3\ninline = { k = 1, m = 2 }\n'
        "[[arr]]\nz = 1\n"
    )
    assert lines.line(["a"]) == 1
    assert lines.line(["b"]) is None  # inside a multi-line string
    assert lines.line(["t", "list"]) == 6
    assert lines.line(["t", "x", "y"]) == 9
    assert lines.line(["t", "inline", "m"]) == 10
    assert lines.line(["t", "inline", "nothing"]) == 10  # nearest enclosing key
    assert lines.line(["arr", "z"]) == 12


def test_init_writes_a_starter_that_validates(tmp_path, capsys):
    path = tmp_path / "perfcast.toml"
    assert main(["init", str(path)]) == 0
    text = path.read_text()
    assert text.count("#") > 20  # commented
    spec = parse_spec(text, path)
    assert spec.varied == ["p", "size"]
    assert main(["init", str(path)]) == 2  # no silent overwrite
    assert "exists" in capsys.readouterr().err


def test_keep_inlined_reaches_perfcast_build_and_needs_a_filter(tmp_path):
    """`[build] keep_inlined = true` is `perfcast build --filter F --keep-inlined` in a campaign;
    without a filter there is nothing to keep, which is a mistake worth naming."""
    body = (
        '[build]\nsources = ["a.c"]\noutput = "a"\nfilter = "f.txt"\nkeep_inlined = true\n'
        '[run]\ncommand = "./a {n}"\n[parameters]\nn = [1, 2]\n'
    )
    path = tmp_path / "perfcast.toml"
    path.write_text(body)
    prefix = perfcast_build_prefix(load_spec(path))
    assert prefix[-4:] == ["--filter", str(tmp_path / "f.txt"), "--keep-inlined", "--"]
    error = spec_error(body.replace('filter = "f.txt"\n', ""), tmp_path)
    assert "perfcast.toml:4:" in str(error) and "build.keep_inlined" in str(error)
    assert "needs build.filter" in str(error)
