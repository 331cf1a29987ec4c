"""The condition sinks record in the frame and hand their records over when it ends.

A condition's labels and outcome go, without a call into the runtime, to a record in the
instrumented function's frame (perfcast_prelude.h); the runtime adds the records to the
calling context when the frame ends, or at exit for frames still active. These tests run
a real program and check that what the profile shows is what per-evaluation recording
shows: labels that appear between iterations, loops left by ``break`` and ``return``,
recursive activations sharing one context, and frames that ``exit()`` never ends.
"""

from __future__ import annotations

import textwrap

import pytest

from perfcast.taint import ArgvParameter, taint_program

pytestmark = pytest.mark.slow

PROGRAM = """\
#include <stdlib.h>
static int grow(int n) {
  int bound = 2, k = 0;
  for (int i = 0; i < bound; i++) { /* grow loop */
    if (i == 1) bound = n;
    k++;
  }
  return k;
}
static int search(int n, int m) {
  for (int i = 0; i < m; i++) { /* search loop */
    if (i * i >= n) return i; /* search guard */
  }
  return -1;
}
static int scan(int n) {
  int k = 0;
  while (k < 1000) { /* scan loop */
    if (k >= n) break; /* scan guard */
    k++;
  }
  return k;
}
static int nest(int d, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) { /* nest loop */
    if (i >= n - 1) s += 2; /* nest last */
    s++;
  }
  if (d > 0) s += nest(d - 1, n);
  return s;
}
struct pair {
  int a;
  int b;
};
static int fields(int n, int m) {
  struct pair p = {0, 0}, q;
  q.a = m;
  q.b = 3;
  for (int i = 0; i < n; i++) p = q; /* fields copy */
  int s = 0;
  for (int j = 0; j < p.b; j++) s++; /* fields use */
  return s;
}
static int wide(int n) {
  long double x = 0;
  for (int i = 0; i < n; i++) x = 2.0L; /* wide set */
  int s = 0;
  for (int j = 0; j < (int)x; j++) s++; /* wide use */
  return s;
}
static int probe(int n) {
  int hits = 0;
  for (int i = 0; i < n; i++)
    if (2 * i < n) hits++; /* probe guard */
  return hits;
}
static void finish(int n, int r) {
  for (int i = 0; i < n; i++) r++; /* finish loop */
  exit(r > 0 ? 0 : 1);
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int m = atoi(argv[2]);
  int r = grow(n) + scan(n) + nest(2, n) + fields(n, m) + wide(n);
  for (int t = 0; t < m; t++) r += search(n, m); /* main loop */
  r += probe(n) + probe(m); /* two call sites of one call path */
  finish(n, r);
  return 0;
}
"""


def line_of(marker: str) -> int:
    """The source line carrying a ``/* marker */`` comment."""
    for number, text in enumerate(PROGRAM.splitlines(), start=1):
        if f"/* {marker} */" in text:
            return number
    raise AssertionError(f"no line marked {marker!r}")


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("sinks")
    (work / "app.c").write_text(textwrap.dedent(PROGRAM))
    return taint_program(
        ["cc", "-O2", "app.c", "-o", "app"],
        "./app 5 4",  # n = 5, m = 4
        [ArgvParameter.parse("n=argv:1"), ArgvParameter.parse("m=argv:2")],
        cwd=work,
    ).to_json()


def only_loop(profile: dict, function: str) -> dict:
    (loop,) = profile["functions"][function]["loops"]
    return loop


def branch_at(profile: dict, function: str, line: int) -> dict:
    (branch,) = [b for b in profile["functions"][function]["branches"] if b["line"] == line]
    return branch


def test_labels_that_enter_between_iterations_are_recorded(profile: dict) -> None:
    # The first two tests of i < bound carry no label; bound = n in the second iteration
    # gives the later tests n.
    loop = only_loop(profile, "grow")
    assert (loop["line"], loop["params"], loop["executed"]) == (line_of("grow loop"), ["n"], True)
    assert profile["functions"]["grow"]["dependency"] == "n"


def test_a_loop_left_by_return_keeps_every_evaluation(profile: dict) -> None:
    # search(5, 4) returns at i = 3 (9 >= 5): four tests of the guard, one true, in each of
    # its four calls.
    loop = only_loop(profile, "search")
    assert loop["line"] == line_of("search loop") and loop["params"] == ["m", "n"]
    guard = branch_at(profile, "search", line_of("search guard"))
    assert guard["params"] == ["n"] and guard["exits_loops_at"] == [line_of("search loop")]
    assert (guard["evaluated"], guard["taken"]) == (16, 4)


def test_two_call_sites_of_one_call_path_add_their_branch_counts(profile: dict) -> None:
    # main calls probe twice, from two sites: two contexts that print as one call path
    # (main->probe). probe(5) tests 2i < 5 five times, true for i = 0, 1, 2; probe(4) four
    # times, true for i = 0, 1. The profile once kept the first context's counts only.
    guard = branch_at(profile, "probe", line_of("probe guard"))
    assert guard["params"] == ["m", "n"]
    assert (guard["evaluated"], guard["taken"]) == (9, 5)


def test_a_loop_left_by_break_keeps_every_evaluation(profile: dict) -> None:
    # k = 0..5: six tests of k >= 5, the last one true.
    loop = only_loop(profile, "scan")
    assert loop["line"] == line_of("scan loop") and loop["params"] == ["n"]
    guard = branch_at(profile, "scan", line_of("scan guard"))
    assert guard["exits_loops_at"] == [line_of("scan loop")]
    assert (guard["evaluated"], guard["taken"]) == (6, 1)


def test_recursive_activations_add_their_records_to_one_context(profile: dict) -> None:
    # nest(2, 5), nest(1, 5), nest(0, 5): five tests of i >= 4 each, the last one true.
    nest = profile["functions"]["nest"]
    assert nest["recursive"] is True
    assert only_loop(profile, "nest")["params"] == ["n"]
    last = branch_at(profile, "nest", line_of("nest last"))
    assert (last["evaluated"], last["taken"]) == (15, 3)


def test_aggregates_keep_their_fields_labels_apart(profile: dict) -> None:
    # p = q under the loop on n: the runtime gives every byte of p the label n, and p.b,
    # which bounds the second loop, carries n and not q.a's m. (The inline or meant for
    # scalars, applied to this struct, lost p.b's n.)
    assert [(lp["line"], lp["params"]) for lp in profile["functions"]["fields"]["loops"]] == [
        (line_of("fields copy"), ["n"]),
        (line_of("fields use"), ["n"]),
    ]


def test_a_long_double_takes_the_control_through_the_runtime(profile: dict) -> None:
    # 16 bytes: no word to or the control into inline.
    assert [(lp["line"], lp["params"]) for lp in profile["functions"]["wide"]["loops"]] == [
        (line_of("wide set"), ["n"]),
        (line_of("wide use"), ["n"]),
    ]


def test_frames_that_exit_never_ends_are_recorded_at_exit(profile: dict) -> None:
    # finish() calls exit(): neither its frame nor main's ends, and their records are
    # written all the same.
    finish = only_loop(profile, "finish")
    assert (finish["line"], finish["params"], finish["executed"]) == (
        line_of("finish loop"),
        ["n"],
        True,
    )
    main = only_loop(profile, "main")
    assert (main["line"], main["params"], main["executed"]) == (line_of("main loop"), ["m"], True)
    assert profile["functions"]["main"]["dependency"] == "m*n"
