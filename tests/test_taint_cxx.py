"""Taint analysis of C++ written the way real codes write it (issue 25): methods called on
``this`` in constructors, member assignments, sources outside the project directory. Every
test compiles and runs a real program with DataFlowSanitizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcast.errors import InputError
from perfcast.taint import ArgvParameter, TaintOptions, taint_program

pytestmark = pytest.mark.slow

THIS_RECEIVERS = """\
#include <cstdlib>
#include <vector>
/* HPCG's shapes: a constructor that fills the object it builds by calling library methods
   on this, explicitly, implied, or through a member pointer, and assigns members. */
struct Explicit : std::vector<int> {
  explicit Explicit(int n) { for (int i = 0; i < n; i++) this->push_back(i); }
};
struct Implied : std::vector<int> {
  explicit Implied(int n) { for (int i = 0; i < n; i++) push_back(i); }
};
struct Through : std::vector<int> {
  Through *self;
  int filled;
  explicit Through(int n) : self(this), filled(0) {
    for (int i = 0; i < n; i++) {
      self->push_back(i);
      this->filled = i;
    }
  }
};
static long over_explicit(const Explicit &v) {
  long s = 0;
  for (std::size_t i = 0; i < v.size(); i++) s += v[i];
  return s;
}
static long over_implied(const Implied &v) {
  long s = 0;
  for (std::size_t i = 0; i < v.size(); i++) s += v[i];
  return s;
}
static long over_through(const Through &v) {
  long s = 0;
  for (std::size_t i = 0; i < v.size(); i++) s += v[i];
  for (int i = 0; i < v.filled; i++) s += i;
  return s;
}
int main(int argc, char **argv) {
  Explicit e(atoi(argv[1]));
  Implied m(atoi(argv[2]));
  Through t(atoi(argv[3]));
  return (over_explicit(e) + over_implied(m) + over_through(t)) < 0;
}
"""


def test_library_methods_called_on_this_taint_the_object_not_the_pointer(tmp_path: Path) -> None:
    """``this->push_back(i)`` under a loop was rewritten to take ``&(this)``, which does not
    compile; the object the call writes is ``*this`` (and ``*self``, not the member pointer
    ``self``), so each size loop depends on the parameter its constructor looped over."""
    (tmp_path / "receivers.cc").write_text(THIS_RECEIVERS)
    profile = taint_program(
        ["c++", "receivers.cc", "-o", "receivers"],
        "./receivers 3 4 5",
        [ArgvParameter.parse(f"{name}=argv:{n}") for n, name in enumerate("abc", 1)],
        cwd=tmp_path,
    ).to_json()
    functions = profile["functions"]
    assert {
        name: functions[name]["dependency"]
        for name in (
            "over_explicit(Explicit const&)",
            "over_implied(Implied const&)",
            "over_through(Through const&)",
        )
    } == {
        "over_explicit(Explicit const&)": "a",
        "over_implied(Implied const&)": "b",
        "over_through(Through const&)": "c",
    }
    assert [loop["params"] for loop in functions["over_through(Through const&)"]["loops"]] == [
        ["c"],
        ["c"],
    ]


MAIN = """\
#include <stdlib.h>
int helper(int n);
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int s = 0;
  for (int i = 0; i < n; i++) s += helper(i);
  return s == 12345;
}
"""
HELPER = "int helper(int n) { int s = 0; for (int i = 0; i < n; i++) s += i; return s; }\n"


def test_a_source_outside_the_root_is_built_as_it_is_and_named(tmp_path: Path) -> None:
    """``--root`` that leaves out one source of the compile command ended in a traceback;
    that source is built uninstrumented and the profile says so. A root that holds no
    source at all is an input error."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "extra").mkdir()
    (tmp_path / "proj" / "main.c").write_text(MAIN)
    (tmp_path / "extra" / "helper.c").write_text(HELPER)
    command = ["cc", "proj/main.c", "extra/helper.c", "-o", "app"]
    binding = [ArgvParameter.parse("n=argv:1")]
    profile = taint_program(
        command, "./app 5", binding, cwd=tmp_path, options=TaintOptions(root=tmp_path / "proj")
    ).to_json()
    assert sorted(profile["functions"]) == ["main"]
    assert profile["functions"]["main"]["dependency"] == "n"
    (warning,) = profile["warnings"]
    assert warning.startswith(f"{tmp_path / 'extra' / 'helper.c'} is outside the project")
    with pytest.raises(InputError, match="holds none of the sources"):
        taint_program(
            command, "./app 5", binding, cwd=tmp_path, options=TaintOptions(root=tmp_path / "x")
        )
