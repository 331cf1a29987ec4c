#!/usr/bin/env bash
# A performance engineer's first day, replayed: LULESH 2.0 and miniFE taken through README.md's
# workflow (taint before the first campaign, design, measure, model summary, predict, export,
# effort priors, static), every command timed, its output kept.
#
#   bash examples/walkthrough/walkthrough.sh [SCRATCH] > docs/walkthrough-transcript.txt 2>&1
#
# The applications are copied from ../shared/apps into SCRATCH (default: a new temporary
# directory) and built there; nothing of theirs enters this repository. docs/walkthrough.md
# reads the transcript as a user would. The transcript must contain no Python stack trace
# (`grep -c Traceback docs/walkthrough-transcript.txt` prints 0).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
apps="$(cd "$here/../../../shared/apps" && pwd)"
scratch="${1:-$(mktemp -d /tmp/perfcast-walkthrough.XXXXXX)}"
mkdir -p "$scratch"
export PERFCAST_CPU_TIME=1   # cpu_time: what oversubscribed ranks really computed

step() {  # step DIR COMMAND...: print, run and time one command as a user would type it
  local dir="$1"; shift
  echo
  echo "\$ (cd $(basename "$dir")) $*"
  local start=$SECONDS
  (cd "$dir" && "$@") 2>&1
  local rc=$?
  echo "[exit $rc, $((SECONDS - start)) s]"
}

echo "# perfcast walkthrough on $(hostname): $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# scratch: $scratch"
total_start=$SECONDS

# ---------------------------------------------------------------- LULESH 2.0
lulesh="$scratch/lulesh"
rm -rf "$lulesh" && cp -r "$apps/lulesh" "$lulesh"
cp "$here/lulesh.toml" "$lulesh/perfcast.toml"
cp "$here/lulesh-effort.toml" "$lulesh/effort.toml"
step "$lulesh" perfcast taint perfcast.toml --point size=6,iterations=2,p=8
step "$lulesh" perfcast design perfcast.toml
step "$lulesh" perfcast measure perfcast.toml
step "$lulesh" perfcast model lulesh.sqlite --at p=4096,size=30 -o lulesh-models.json
step "$lulesh" perfcast model lulesh.sqlite --metric cpu_time --taint lulesh.taint.json \
  --at p=4096,size=30 -o lulesh-cpu.json
# predict gives each call path's own (exclusive) value: ask for the kernels, not their callers.
step "$lulesh" perfcast predict lulesh-cpu.json p=64,512,4096 size=30 \
  --callpath CalcHourglassControlForElems --callpath CalcKinematicsForElems
# Effort priors (README): a counting campaign of its own, then time models whose exponents
# the counts fix; cpu_time, since 8 and 27 ranks share 2 cores and wall time waits for them.
step "$lulesh" perfcast measure effort.toml
step "$lulesh" perfcast model lulesh.sqlite --priors effort --effort-counts counts.sqlite \
  --time-metric cpu_time --metric cpu_time --at p=4096,size=30 -o lulesh-effort.json
# The ten most expensive call paths by CPU time, their models side by side (docs/walkthrough.md).
step "$lulesh" python3 "$here/top_callpaths.py" lulesh-models.json \
  time=lulesh-models.json:time cpu_time=lulesh-models.json:cpu_time \
  taint=lulesh-cpu.json:cpu_time effort=lulesh-effort.json:cpu_time \
  basic_blocks=lulesh-effort.json:basic_blocks
step "$lulesh" perfcast export lulesh.sqlite -o lulesh.txt
# Static model: needs a -g build of its own (any optimisation level); MPI flags come from mpicxx.
step "$lulesh" mpicxx -g -O2 -DUSE_MPI=1 lulesh.cc lulesh-comm.cc lulesh-viz.cc lulesh-util.cc \
  lulesh-init.cc -o lulesh-g
step "$lulesh" perfcast static lulesh.cc --binary lulesh-g -o lulesh-static.py \
  --cflags "-DUSE_MPI=1" --function CalcKinematicsForElems
step "$lulesh" perfcast static eval lulesh-static.py --function CalcKinematicsForElems \
  numElem=5832

# ---------------------------------------------------------------- miniFE
minife="$scratch/minife"
rm -rf "$minife" && cp -r "$apps/minife/ref" "$minife"
cp "$here/minife.toml" "$minife/src/perfcast.toml"
# No taint step for miniFE: it parses -nx with std::istringstream inside libstdc++, which
# DataFlowSanitizer cannot see into, so the profile would say nx drives nothing (docs/walkthrough.md).
step "$minife/src" perfcast design perfcast.toml
step "$minife/src" perfcast measure perfcast.toml
step "$minife/src" perfcast model minife.sqlite --at p=64,nx=64 -o minife-models.json
step "$minife/src" perfcast model minife.sqlite --metric cpu_time --callpath cg_solve \
  --full -o minife-cpu.json
step "$minife/src" perfcast predict minife-cpu.json p=16,64,256 nx=64
step "$minife/src" python3 "$here/top_callpaths.py" minife-models.json \
  time=minife-models.json:time cpu_time=minife-models.json:cpu_time
step "$minife/src" perfcast export minife.sqlite -o minife.json

echo
echo "# total: $((SECONDS - total_start)) s"
echo "# end of the walkthrough (docs/walkthrough.md: no Python stack trace may appear above)"
