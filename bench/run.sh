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
# BENCH_STARTUP_ALARMS (10000), BENCH_PROFILE (1), BENCH_CROSSCHECK (BENCH_RUNS: the shared
# harness ../shared/bench/load.py runs in every round, where that file exists; N: in the first N
# rounds; 0: never), BENCH_EQUAL_IDLE (10: doemu's idle timeout in the equal-policy RSS run,
# workerd's), BENCH_WORK (scratch dir for persist dirs, default ${TMPDIR:-/tmp}/doemu-bench),
# BENCH_LOAD_ARGS and BENCH_SHARED_ARGS (extra bench/load.py and shared load.py options, e.g.
# '--rss-marks 200,1000' for a quick try; not for real numbers), BENCH_CHAT_ARGS (extra
# bench/chatload.py options), BENCH_SERVER_ARGS (extra bench/serverload.py options), BENCH_PHASES
# (abcdefghijk: which phases run; i is the chat rows, j the agent-server rows, k the bindings rows
# (KV, D1, R2 beside Miniflare, bench/bindingsload.py), so
# `BENCH_PHASES=i BENCH_MICRO_RUNS=0 BENCH_PROFILE=0 bash bench/run.sh` runs only the chat rows).
# `bash bench/run.sh --summarize` only rewrites BENCHMARKS.md from bench/results/.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
RESULTS="$repo/bench/results"
BPY="$repo/bench/.venv/bin/python"

# BENCHMARKS.md describes one commit: no run on uncommitted changes to the code it measures,
# and no report written into a tree whose measured code differs from the commit measured
# (bench/provenance.py). BENCH_ALLOW_DIRTY=1 allows both, and the report then says it is a draft.
DIRTY_OK=()
[ "${BENCH_ALLOW_DIRTY:-0}" = 1 ] && DIRTY_OK=(--allow-dirty)

if [ "${1:-}" = "--summarize" ]; then
  "$BPY" bench/summarize.py --results "$RESULTS" --out "$repo/BENCHMARKS.md" "${DIRTY_OK[@]}"
  exit 0
fi

RUNS="${BENCH_RUNS:-3}"
DURATION="${BENCH_DURATION:-3}"
WARMUP="${BENCH_WARMUP:-1}"
MICRO_RUNS="${BENCH_MICRO_RUNS:-3}"
STARTUP_OBJECTS="${BENCH_STARTUP_OBJECTS:-100000}"
STARTUP_ALARMS="${BENCH_STARTUP_ALARMS:-10000}"
PROFILE="${BENCH_PROFILE:-1}"
CROSSCHECK="${BENCH_CROSSCHECK:-$RUNS}"
EQUAL_IDLE="${BENCH_EQUAL_IDLE:-10}"
RUN_PHASES="${BENCH_PHASES:-abcdefghijkl}"
WORK="${BENCH_WORK:-${TMPDIR:-/tmp}/doemu-bench}"
t_start=$SECONDS

say() { printf '\n== %s\n' "$*" >&2; }

if [ "${#DIRTY_OK[@]}" = 0 ]; then python3 bench/provenance.py check-clean; fi

# ---------------------------------------------------------------- tools
say "setting up"
if [ ! -x .venv/bin/doemu ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet -e '.[dev]'
fi
# doemu's .pyc files: with PYTHONDONTWRITEBYTECODE set nothing else writes them, and every restart
# (phase g) would compile ~100 modules again (60-80 ms). Quick when they are already current.
.venv/bin/python -m compileall -q doemu agents bench/app
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
# workerd serves phases a-i (phase j, the agent-server rows, is doemu only)
if [[ "$RUN_PHASES" == *[a-i]* ]]; then
  (cd bench/peer && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
# The chat peer: Cloudflare's AIChatAgent and the AI SDK (pinned), bundled for workerd.
if [[ "$RUN_PHASES" == *i* ]]; then
  (cd bench/peer-chat && npm ci --no-audit --no-fund --loglevel=error >/dev/null && ./build.sh)
fi
# The bindings and durable-work rows' peer: Miniflare (pinned), what wrangler dev runs.
if [[ "$RUN_PHASES" == *[kl]* ]]; then
  (cd bench/peer-bindings && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# doemu derives its default live-object cap from the open-file limit: make the limit the same on
# every machine (32,768, or the hard limit if lower); workerd keeps every live object's files open
# and needs it too, and so does doemu's equal-policy run (below), which lifts the cap.
hard="$(ulimit -Hn)"
if [ "$hard" = unlimited ] || [ "$hard" -ge 32768 ]; then ulimit -n 32768; else ulimit -n "$hard"; fi
# The equal-policy run: as many live objects as the descriptors allow (three per live object:
# the database, its WAL and its shared-memory index; 1,024 kept for everything else).
EQUAL_CAP=$(( ($(ulimit -n) - 1024) / 3 ))

rm -rf "$RESULTS" "$WORK"
mkdir -p "$RESULTS" "$WORK"
trap 'rm -rf "$WORK"' EXIT  # persist dirs (the start-up one is ~3 GB) never outlive the run
: > "$RESULTS/commands.txt"
"$BPY" bench/envinfo.py "$RESULTS/env.json" --work "$WORK" \
  --windows "${DURATION} s measured after ${WARMUP} s warm-up per throughput row; ${RUNS} runs per server, interleaved phase by phase, a fresh server for every phase"

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

# doemu at power durability (workerd's: every commit durable before its output leaves) is the
# one the targets are judged on; storage phases also run at process durability.
doemu_at() {  # port, state, durability, extra options
  echo "exec $repo/.venv/bin/doemu dev --config $repo/bench/app/wrangler.toml --port $1 --persist-to $2 --log-level warning --durability $3${4:+ $4}"
}
doemu_cmd() { doemu_at "$1" "$2" power; }
doemu_process_cmd() { doemu_at "$1" "$2" process; }
doemu_equal_cmd() { doemu_at "$1" "$2" power "--idle-timeout $EQUAL_IDLE --max-live-objects $EQUAL_CAP"; }
workerd_cmd() { echo "exec $repo/bench/peer/serve.sh $1 $2"; }
# The chat rows' servers (phase i): the same agent on each, the fake provider's URL as the third
# argument (doemu: --var OPENAI_BASE_URL; workerd: the PROVIDER_URL environment binding). doemu's
# fan-out runs twice: the agent a user writes (model_reply, judged) and its lighter path (--light).
doemu_chat_cmd() { echo "exec $repo/bench/app/chat/serve.sh $1 $2 $3 --durability power"; }
workerd_chat_cmd() { echo "exec $repo/bench/peer-chat/serve.sh $1 $2 $3"; }
# The agent-server rows' server (phase j, doemu only): bench/app/server, the fake provider's URL
# as the third argument (env.OPENAI_BASE_URL through --var), at each durability level.
doemu_server_at() {  # port, state, provider url, durability
  echo "exec $repo/.venv/bin/doemu dev --config $repo/bench/app/server/wrangler.toml --port $1 --persist-to $2 --log-level warning --durability $4 --var OPENAI_BASE_URL:$3 --var OPENAI_API_KEY:bench"
}
doemu_server_cmd() { doemu_server_at "$1" "$2" "$3" power; }
doemu_process_server_cmd() { doemu_server_at "$1" "$2" "$3" process; }

# What each variant runs: doemu (power) and workerd every phase; doemu at process durability the
# phases that write (b incr, c cold first request, d alarms, f new objects and RSS); doemu with
# workerd's eviction policy (idle objects evicted after EQUAL_IDLE s, no lower live cap) phase f;
# phase i (the chat rows, bench/chatload.py) doemu at power and workerd, each with its own chat
# server (bench/app/chat, bench/peer-chat) and a fresh fake provider; phase j (the agent-server
# rows, bench/serverload.py) doemu only, at both durability levels, each with a fresh provider.
declare -A PHASES=([doemu]=abcdefghij [workerd]=abcdefghi [doemu_process]=bcdfj [doemu_equal]=f)
VARIANTS=(doemu workerd doemu_process doemu_equal)

load_run() {  # label, index, phase(s): one invocation = one fresh server on fresh state
  local label="$1" i="$2" phases="$3" port state
  port="$(free_port)"
  state="$WORK/state-$label-$i-$phases"
  rm -rf "$state"
  # shellcheck disable=SC2086
  logged "$BPY" bench/load.py --label "$label" --port "$port" --phases "$phases" \
    --duration "$DURATION" --warmup "$WARMUP" ${BENCH_LOAD_ARGS:-} --server-cmd "$("${label}_cmd" "$port" "$state")" \
    --server-log "$RESULTS/$label-$i.server.log" --out "$RESULTS/$label-$i.json" --merge > /dev/null
}

chat_run() {  # label, index: the chat rows against one fresh chat server and fresh provider
  local label="$1" i="$2" port pport state
  port="$(free_port)"
  pport="$(free_port)"
  while [ "$pport" = "$port" ]; do pport="$(free_port)"; done
  state="$WORK/state-$label-$i-i"
  rm -rf "$state"
  # shellcheck disable=SC2086
  logged "$BPY" bench/chatload.py --label "$label" --port "$port" --provider-port "$pport" \
    ${BENCH_CHAT_ARGS:-} --server-cmd "$("${label}_chat_cmd" "$port" "$state" "http://127.0.0.1:$pport/v1")" \
    --server-log "$RESULTS/$label-$i.server.log" --out "$RESULTS/$label-$i.json" --merge \
    $([ "$label" = doemu ] && echo --light) \
    $([ "$i" = 1 ] && echo --frames-log "$RESULTS/$label-chat-frames.json") > /dev/null
}

server_run() {  # label, index: the agent-server rows against one fresh doemu and fresh provider
  local label="$1" i="$2" port pport state
  port="$(free_port)"
  pport="$(free_port)"
  while [ "$pport" = "$port" ]; do pport="$(free_port)"; done
  state="$WORK/state-$label-$i-j"
  rm -rf "$state"
  # shellcheck disable=SC2086
  logged "$BPY" bench/serverload.py --label "$label" --port "$port" --provider-port "$pport" \
    ${BENCH_SERVER_ARGS:-} --server-cmd "$("${label}_server_cmd" "$port" "$state" "http://127.0.0.1:$pport/v1")" \
    --server-log "$RESULTS/$label-$i.server.log" --out "$RESULTS/$label-$i.json" --merge > /dev/null
}

floor_run() {  # index, pre|post: a bare write+fdatasync loop on the persist dirs' file system
  logged "$BPY" bench/fsyncfloor.py --dir "$WORK/floor-$1-$2" --duration "$DURATION" \
    --out "$RESULTS/floor-$1-$2.json" > /dev/null
}

shared="$repo/../shared/bench/load.py"
[ -f "$shared" ] || CROSSCHECK=0
shared_run() {  # label, index, phase: the shared harness, one phase against one fresh server
  local label="$1" i="$2" phase="$3" port state
  port="$(free_port)"
  state="$WORK/cc-$label-$i-$phase"
  rm -rf "$state"
  logged "$BPY" bench/crosscheck.py run --shared "$shared" --results "$RESULTS" --label "$label" \
    --run "$i" --phases "$phase" --port "$port" --duration "$DURATION" --warmup "$WARMUP" \
    --server-cmd "$("${label}_cmd" "$port" "$state")" ${BENCH_SHARED_ARGS:+--extra "$BENCH_SHARED_ARGS"}
}

# ---------------------------------------------------------------- contract runs
# Phase by phase, every variant back to back (the order rotates each round), so the servers
# compared in a row are measured within a minute or two of each other on this shared machine;
# the shared harness's runs of that phase follow in the cross-check rounds.
for i in $(seq 1 "$RUNS"); do
  order=("${VARIANTS[@]:$(( (i - 1) % ${#VARIANTS[@]} ))}" "${VARIANTS[@]:0:$(( (i - 1) % ${#VARIANTS[@]} ))}")
  for phase in a b c d e f g h i j; do
    [[ "$RUN_PHASES" == *"$phase"* ]] || continue
    say "run $i/$RUNS, phase $phase"
    # The disk's own limit (bench/fsyncfloor.py), right before and after phase b's servers.
    if [ "$phase" = b ]; then floor_run "$i" pre; fi
    for label in "${order[@]}"; do
      if [[ "${PHASES[$label]}" != *"$phase"* ]]; then continue; fi
      case "$phase" in
        i) chat_run "$label" "$i" ;;
        j) server_run "$label" "$i" ;;
        *) load_run "$label" "$i" "$phase" ;;
      esac
    done
    if [ "$phase" = b ]; then
      floor_run "$i" post
      "$BPY" bench/fsyncfloor.py --merge "$RESULTS/floor-$i-pre.json" "$RESULTS/floor-$i-post.json" \
        -- "$RESULTS"/{doemu,doemu_process,workerd}-"$i".json
    fi
    if [ "$i" -le "$CROSSCHECK" ] && [[ abcdefg == *"$phase"* ]]; then
      cc_order=(doemu workerd)
      if [ $(( i % 2 )) = 0 ]; then cc_order=(workerd doemu); fi
      for label in "${cc_order[@]}"; do shared_run "$label" "$i" "$phase"; done
    fi
  done
done
if [ "$CROSSCHECK" -gt 0 ]; then "$BPY" bench/crosscheck.py compare --results "$RESULTS"; fi
# Phase k: the bindings rows, doemu (both durability levels) and Miniflare interleaved run by run.
if [[ "$RUN_PHASES" == *k* ]]; then
  say "bindings rows (phase k)"
  logged "$BPY" bench/bindingsload.py --results "$RESULTS" --work "$WORK" --runs "$RUNS" \
    --duration "$DURATION" --warmup "$WARMUP"
fi
# Phase l: the durable-work rows (Queues, Workflows), doemu (both levels) and Miniflare.
if [[ "$RUN_PHASES" == *l* ]]; then
  say "durable-work rows (phase l)"
  # shellcheck disable=SC2086
  logged "$BPY" bench/durableload.py --results "$RESULTS" --work "$WORK" --runs "$RUNS" ${BENCH_DURABLE_ARGS:-}
fi
# The persist dirs go only now: deleting thousands of files is file-system work of its own, which
# must not run right before another server's cold or create phase.
rm -rf "$WORK"/state-* "$WORK"/cc-*

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
      --parts "$parts" --durability power --server-log "$RESULTS/micro-$i.server.log" \
      --out "$RESULTS/micro-$i.json" > /dev/null
    # the parts that write (stash's commits, the overdue alarms' handlers) at process durability
    logged "$BPY" bench/micro.py --work "$WORK/micro" --template "$template" --port "$(free_port)" \
      --parts stash,startup --durability process --server-log "$RESULTS/micro_process-$i.server.log" \
      --out "$RESULTS/micro_process-$i.json" > /dev/null
  done
fi

# ---------------------------------------------------------------- profiles of the misses
"$BPY" bench/summarize.py --results "$RESULTS" --targets-only
if [ "$PROFILE" = 1 ]; then
  say "profiling every missed target"
  logged "$BPY" bench/profile_misses.py --results "$RESULTS" --work "$WORK/profile" --template "$template" \
    --port "$(free_port)"
fi

rm -rf "$WORK"
"$BPY" bench/envinfo.py "$RESULTS/env.json" --finish "$((SECONDS - t_start))"
"$BPY" bench/summarize.py --results "$RESULTS" --out "$repo/BENCHMARKS.md" "${DIRTY_OK[@]}"
say "wrote BENCHMARKS.md ($(( (SECONDS - t_start) / 60 )) min)"
