#!/usr/bin/env bash
# `make bench`: doemu against bare workerd on the benchmark contract, in one sitting, and
# BENCHMARKS.md from the results. Works from a fresh clone: it creates the project venv if
# missing, the bench's own venv (bench/.venv: py-spy, uvloop, aiohttp), installs wrk with apt when
# it can (else the asyncio client measures the HTTP rows), and runs `npm ci` for the pinned
# workerd. Every server it starts runs in its own process group and is stopped by the script that
# started it; nothing is left running.
#
# Knobs (environment): BENCH_RUNS (3), BENCH_DURATION (3 s measured per throughput row),
# BENCH_WARMUP (1 s), BENCH_MICRO_RUNS (3), BENCH_STARTUP_OBJECTS (100000),
# BENCH_STARTUP_ALARMS (10000), BENCH_PROFILE (1), BENCH_CROSSCHECK (0; 1 runs
# ../shared/bench/load.py once against both servers, where that file exists),
# BENCH_WORK (scratch dir for persist dirs, default ${TMPDIR:-/tmp}/doemu-bench), BENCH_LOAD_ARGS
# (extra bench/load.py options, e.g. '--rss-marks 200,1000' for a quick try; not for real numbers).
# `bash bench/run.sh --summarize` only rewrites BENCHMARKS.md from bench/results/.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
RESULTS="$repo/bench/results"
BPY="$repo/bench/.venv/bin/python"

if [ "${1:-}" = "--summarize" ]; then
  "$BPY" bench/summarize.py --results "$RESULTS" --out "$repo/BENCHMARKS.md"
  exit 0
fi

RUNS="${BENCH_RUNS:-3}"
DURATION="${BENCH_DURATION:-3}"
WARMUP="${BENCH_WARMUP:-1}"
MICRO_RUNS="${BENCH_MICRO_RUNS:-3}"
STARTUP_OBJECTS="${BENCH_STARTUP_OBJECTS:-100000}"
STARTUP_ALARMS="${BENCH_STARTUP_ALARMS:-10000}"
PROFILE="${BENCH_PROFILE:-1}"
CROSSCHECK="${BENCH_CROSSCHECK:-0}"
WORK="${BENCH_WORK:-${TMPDIR:-/tmp}/doemu-bench}"
t_start=$SECONDS

say() { printf '\n== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- tools
say "setting up"
if [ ! -x .venv/bin/doemu ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet -e '.[dev]'
fi
if [ ! -x bench/.venv/bin/py-spy ] || ! "$BPY" -c 'import aiohttp, uvloop' 2>/dev/null; then
  python3 -m venv bench/.venv
  bench/.venv/bin/python -m pip install --quiet -r bench/requirements.txt
fi
if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq wrk >/dev/null 2>&1; } || true
  fi
  command -v wrk >/dev/null || echo "wrk not available: the asyncio client measures the HTTP rows" >&2
fi
if ! command -v npm >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -qq nodejs npm >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nodejs npm >/dev/null 2>&1; } || true
fi
(cd bench/peer && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# doemu derives its live-object cap from the open-file limit: make it the same on every machine
# (20,000, or the hard limit if lower); workerd keeps every object's files open and needs it too.
hard="$(ulimit -Hn)"
if [ "$hard" = unlimited ] || [ "$hard" -ge 20000 ]; then ulimit -n 20000; else ulimit -n "$hard"; fi

rm -rf "$RESULTS" "$WORK"
mkdir -p "$RESULTS" "$WORK"
trap 'rm -rf "$WORK"' EXIT  # persist dirs (the start-up one is ~3 GB) never outlive the run
: > "$RESULTS/commands.txt"
"$BPY" bench/envinfo.py "$RESULTS/env.json" --work "$WORK" \
  --windows "${DURATION} s measured after ${WARMUP} s warm-up per throughput row; ${RUNS} runs per server, interleaved"

free_port() { "$BPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Logs a command into results/commands.txt (repo-relative, scratch dir as $WORK) and runs it.
logged() {
  local line="" arg
  for arg in "$@"; do
    if [[ "$arg" =~ [^A-Za-z0-9_./,:=+-] ]]; then line+="\"$arg\" "; else line+="$arg "; fi
  done
  line="${line% }"
  line="${line//$repo\//}"
  line="${line//$WORK/\$WORK}"
  echo "$line" >> "$RESULTS/commands.txt"
  "$@"
}

doemu_cmd() { echo "exec $repo/.venv/bin/doemu dev --config $repo/bench/app/wrangler.toml --port $1 --persist-to $2 --log-level warning"; }
workerd_cmd() { echo "exec $repo/bench/peer/serve.sh $1 $2"; }

load_run() {  # label, index, command function, phases
  local label="$1" i="$2" fn="$3" phases="$4" port state
  port="$(free_port)"
  state="$WORK/state-$label-$i"
  rm -rf "$state"
  # shellcheck disable=SC2086
  logged "$BPY" bench/load.py --label "$label" --port "$port" --phases "$phases" \
    --duration "$DURATION" --warmup "$WARMUP" ${BENCH_LOAD_ARGS:-} --server-cmd "$($fn "$port" "$state")" \
    --server-log "$RESULTS/$label-$i.server.log" --out "$RESULTS/$label-$i.json" > /dev/null
  rm -rf "$state"
}

# ---------------------------------------------------------------- contract runs
for i in $(seq 1 "$RUNS"); do
  say "run $i/$RUNS: doemu"
  load_run doemu "$i" doemu_cmd abcdefgh
  say "run $i/$RUNS: workerd"
  load_run workerd "$i" workerd_cmd abcdefgh
done

# ---------------------------------------------------------------- micro-benchmarks
template="$WORK/persist-100k"
if [ "$MICRO_RUNS" -gt 0 ]; then
  say "generating a persist dir: $STARTUP_OBJECTS objects, $STARTUP_ALARMS overdue alarms"
  logged .venv/bin/python bench/gen_persist.py --out "$template" --objects "$STARTUP_OBJECTS" \
    --alarms "$STARTUP_ALARMS" > "$RESULTS/gen.json"
  for i in $(seq 1 "$MICRO_RUNS"); do
    say "micro-benchmarks $i/$MICRO_RUNS"
    # eviction and RSS per object are near-deterministic (and slow): first run only
    parts=stash,startup
    [ "$i" = 1 ] && parts=stash,evicted_cold,rss,startup
    logged "$BPY" bench/micro.py --work "$WORK/micro" --template "$template" --port "$(free_port)" \
      --parts "$parts" --server-log "$RESULTS/micro-$i.server.log" --out "$RESULTS/micro-$i.json" > /dev/null
  done
fi

# ---------------------------------------------------------------- profiles of the misses
"$BPY" bench/summarize.py --results "$RESULTS" --targets-only
if [ "$PROFILE" = 1 ]; then
  say "profiling every missed target"
  logged "$BPY" bench/profile_misses.py --results "$RESULTS" --work "$WORK/profile" --template "$template" \
    --port "$(free_port)"
fi

# ---------------------------------------------------------------- one-time cross-check
shared="$repo/../shared/bench/load.py"
if [ "$CROSSCHECK" = 1 ] && [ -f "$shared" ]; then
  say "cross-check with ../shared/bench/load.py"
  port="$(free_port)"
  rm -rf "$WORK/cc-doemu" "$WORK/cc-workerd"
  logged "$BPY" bench/crosscheck.py --shared "$shared" --results "$RESULTS" --port "$port" \
    --doemu-cmd "$(doemu_cmd "$port" "$WORK/cc-doemu")" --workerd-cmd "$(workerd_cmd "$port" "$WORK/cc-workerd")"
fi

rm -rf "$WORK"
"$BPY" bench/envinfo.py "$RESULTS/env.json" --finish "$((SECONDS - t_start))"
"$BPY" bench/summarize.py --results "$RESULTS" --out "$repo/BENCHMARKS.md"
say "wrote BENCHMARKS.md ($(( (SECONDS - t_start) / 60 )) min)"
