#!/bin/bash
# Issues 11 and 17 on a fresh GPU machine (torch with CUDA, a system CUDA toolkit, no network), in phases that
# each stay well under 9 minutes (the lent machine's limit is 10 per command):
#
#   docs/gpu-proof/run-seed-job.sh env          # ~6 min: FusedAdam with the system toolkit; channel from the
#                                               # machine's toolkit; envlock resolve + create; toolkit moved away;
#                                               # in the env: doctor --compile, FusedAdam + one step, load_inline;
#                                               # then the env without libcusparse-dev (the seed failure, predicted)
#   docs/gpu-proof/run-seed-job.sh ops-system   # ~6 min: the gpu-marked tests, then every DeepSpeed JIT op
#                                               # against the full system toolkit
#   docs/gpu-proof/run-seed-job.sh ops-env      # ~7 min: every op in the envlock env (--with deepspeed), toolkit away
#   docs/gpu-proof/run-seed-job.sh all          # the three in one go (a machine without a per-command limit)
#   docs/gpu-proof/run-seed-job.sh prepare      # on a connected machine first: the wheels and sdist below into
#                                               # .whl/ (SEED_TARGET_PY: the GPU machine's python, default 3.12)
#   docs/gpu-proof/run-seed-job.sh restore      # put a toolkit back that a killed phase left moved away
#   docs/gpu-proof/run-seed-job.sh merge OPS-SYSTEM.json OPS-ENV.json OUT.json   # anywhere: the ops table
#
# Records go to ${OUT:-./gpu-proof-out}: <date>-deepspeed-fusedadam.json, <date>-deepspeed-runtime-only.json
# (env), gpu-tests.txt + ops-system.json / ops-env.json (+ <date>-deepspeed-ops.json when both are there),
# <phase>.log and <phase>-steps.txt.
# Carried in .whl/ (no network there): py-rattler 0.28.0, zstandard, platformdirs (envlock and the channel
# builder), hjson, pydantic, pydantic-core, annotated-types, typing-inspection and the deepspeed-0.19.8 sdist.
# Every phase sets itself up (a fresh machine is bare); one that finds its work in $SEED_WORK skips it.
# The system toolkit is renamed (/usr/local/cuda and what it points to, + ".seed-hidden") and put back by a
# trap on exit, also on failure; a phase killed at the limit (SIGKILL: no trap) is repaired by the next
# phase's start or by `restore`.
# Knobs: SEED_TOOLKIT (default: readlink -f /usr/local/cuda), SEED_HIDE (paths to move away), SEED_LIBS
# (all|linked: shared libraries the channel carries), SEED_TORCH (installed), SEED_PYTHON (python3),
# SEED_PARALLEL (4 op builds at a time; MAX_JOBS = cores / that), SEED_OPS (a,b: only these ops),
# SEED_PHASE_BUDGET_S (540),
# SEED_SKIP_INSTALL=1 (use what the python already has), SEED_WORK (/tmp/seed-work).
set -uo pipefail
phase=${1:-all}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
py=${SEED_PYTHON:-python3}
helper="$REPO/docs/gpu-proof/seed_job.py"

if [ "$phase" = merge ]; then  # no GPU, no setup: two sweeps → the ops table
  exec "$py" "$helper" merge-ops "$2" "$3" "$4"
fi
if [ "$phase" = prepare ]; then  # a connected machine, from the package index pip is configured with
  target=${SEED_TARGET_PY:-3.12}
  "$py" -m pip download -q -d .whl --python-version "$target" --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    --only-binary :all: \
    py-rattler==0.28.0 zstandard platformdirs hjson pydantic || exit 1
  "$py" -m pip download -q -d .whl --no-deps --no-binary :all: deepspeed==0.19.8 || exit 1
  du -sh .whl; ls .whl
  exit 0
fi

out=${OUT:-./gpu-proof-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
day=$(date -u +%F)
export SEED_WORK=${SEED_WORK:-/tmp/seed-work}; work=$SEED_WORK; mkdir -p "$work"
site=${SEED_SITE:-/tmp/seed-site}
channel=$work/channel; proj=$work/project; prefix=$work/env
deadline=$(( $(date +%s) + ${SEED_PHASE_BUDGET_S:-540} ))
# The machine's default TORCH_CUDA_ARCH_LIST=9.0a crashes DeepSpeed 0.19.8's builder (int('0a')).
export TORCH_CUDA_ARCH_LIST=${SEED_ARCH_LIST:-9.0}
export ENVLOCK_CACHE_DIR="$work/envlock-cache" PYTHONUNBUFFERED=1 DS_BUILD_OPS=0
export PYTHONPATH="$REPO:$site${PYTHONPATH:+:$PYTHONPATH}"
exec > >(tee -a "$out/$phase.log") 2>&1

# the log goes to stderr (the phase's log all the same): a step whose stdout is its result (the channel
# builder's JSON) must not get the log line in it
log() { echo "== $(date -u +%T) $*" | tee -a "$work/log.txt" >&2; }
left() { echo $(( deadline - $(date +%s) )); }
# run CMD...: every command behind the records is recorded, and none outlives the phase's budget (the records
# are written at the end, whatever ran or not)
run() {
  printf '%s\n' "$*" >> "$work/commands.txt"
  local l; l=$(left)
  if [ "$l" -lt 20 ]; then log "skipped, the phase's budget is used up: $*"; return 124; fi
  timeout --kill-after=10 "$l" "$@"
}
envlock() { "$py" -m envlock "$@"; }
took() { local ms=$(( ($(date +%s%N) - $2) / 1000000 )); printf '%s %d.%03d\n' "$1" $((ms / 1000)) $((ms % 1000)) >> "$work/timings.txt"; }
# seed_json NAME CMD...: run, keep the helper's SEED_JSON line as $work/NAME.json, time it
seed_json() {
  local name=$1; shift; local t0; t0=$(date +%s%N)
  run "$@" > "$work/$name.out" 2> "$work/$name.err"; local rc=$?
  grep '^SEED_JSON=' "$work/$name.out" | tail -1 | cut -d= -f2- > "$work/$name.json"
  [ -s "$work/$name.json" ] || printf '{"ok": false, "error": %s}\n' "$(tail -c 1500 "$work/$name.err" | "$py" -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" > "$work/$name.json"
  took "$name" "$t0"
  log "$name: exit $rc $(head -c 300 "$work/$name.json")"
  return $rc
}
timed() { local name=$1; shift; local t0; t0=$(date +%s%N); run "$@"; local rc=$?; took "$name" "$t0"; log "$name: exit $rc"; return $rc; }

restore_toolkit() {
  [ -f "$work/hidden.list" ] || return 0
  tac "$work/hidden.list" | while read -r p; do
    case "$p" in
      mount:*) umount "${p#mount:}" && log "uncovered ${p#mount:}" ;;
      *) if [ -e "$p.seed-hidden" ] || [ -L "$p.seed-hidden" ]; then mv "$p.seed-hidden" "$p" && log "restored $p"; fi ;;
    esac
  done
  rm -f "$work/hidden.list"
}
hide_toolkit() {
  : > "$work/hidden.list"
  for p in $hide; do
    if [ -e "$p" ] || [ -L "$p" ]; then
      if mv "$p" "$p.seed-hidden"; then
        echo "$p" >> "$work/hidden.list"
      elif [ -d "$p" ] && mount -t tmpfs -o size=1m seed-hidden "$p"; then  # a read-only image: cover it
        echo "mount:$p" >> "$work/hidden.list"
      else
        log "could not move or cover $p"
      fi
    fi
  done
  hash -r
  local outside; outside=$(command -v nvcc || echo none)
  local found; found=$(find /usr /opt -name nvcc -type f 2>/dev/null | grep -v "$work" | head -5 | tr '\n' ' ')
  "$py" - "$work/hidden.list" "$outside" "$found" > "$work/hidden.json" <<'PY'
import json, os, sys
hidden = [l for l in open(sys.argv[1]).read().splitlines() if l]
how = {h.split(":", 1)[-1]: ("covered by an empty tmpfs" if h.startswith("mount:") else f"renamed to {h}.seed-hidden") for h in hidden}
print(json.dumps({"hidden": sorted(how), "how": how, "nvcc_outside_env": sys.argv[2],
                  "nvcc_files_left_in_usr_and_opt": sys.argv[3].split(), "usr_local": sorted(os.listdir("/usr/local"))}))
PY
  log "hid: $(cat "$work/hidden.json")"
}
trap restore_toolkit EXIT
trap 'restore_toolkit; exit 130' INT TERM
restore_toolkit  # a previous phase killed at the limit left it moved away: before reading where it is
toolkit=${SEED_TOOLKIT:-$(readlink -f /usr/local/cuda 2>/dev/null || echo /usr/local/cuda)}
hide=${SEED_HIDE:-/usr/local/cuda $toolkit}

setup() {
  [ -f "$work/setup.done" ] && return 0
  log "setup: wheels and the DeepSpeed sdist into $site"
  if [ "${SEED_SKIP_INSTALL:-0}" != 1 ]; then
    timed install-wheels "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || return 1
    timed install-deepspeed "$py" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --target "$site" .whl/deepspeed-0.19.8.tar.gz || return 1
  fi
  "$py" -c "import rattler, zstandard, platformdirs, hjson, pydantic, torch, deepspeed; print('deepspeed', deepspeed.__version__, 'torch', torch.__version__)" || return 1
  seed_json facts "$py" "$helper" facts
  touch "$work/setup.done"
}

# The env: a channel from the machine's own toolkit (real NVIDIA binaries, conda-forge names), locked
# toolchain-only (issue 16: no python, no PyPI part: the machine's torch is the anchor) and created by envlock.
make_env() {
  [ -f "$work/env.done" ] && return 0
  mkdir -p "$proj"
  if [ ! -f "$channel/envlock-repack.json" ]; then
    timed channel "$py" -m tests.toolkit_channel --toolkit "$toolkit" --out "$channel" --libs "${SEED_LIBS:-all}" > "$work/channel.json" || return 1
  fi
  rm -rf "$prefix"
  timed resolve "$py" -m envlock resolve --torch "${SEED_TORCH:-installed}" --python-exe "$py" --toolchain-only --with deepspeed \
    --channel "file://$channel" --project-dir "$proj" --name seed || return 1
  timed create "$py" -m envlock create --lock "$proj/locks/seed/conda-lock.yml" -p "$prefix" -q || return 1
  grep -E '^- name: |^  version: ' "$proj/locks/seed/conda-lock.yml" | paste - - | sed 's/- name: //; s/  version: / /' > "$work/lock-summary.txt"
  touch "$work/env.done"
}

sweep_budget() { local left=$(( deadline - $(date +%s) - 45 )); echo $(( left > 60 ? left : 60 )); }

phase_env() {
  setup || { log "setup failed"; return 1; }
  log "A. FusedAdam with the system toolkit ($toolkit), before anything is moved"
  TORCH_EXTENSIONS_DIR=$work/ext-system seed_json fusedadam-system "$py" "$helper" fusedadam
  make_env || { log "make_env failed"; return 1; }
  hide_toolkit
  log "B. in the env, system toolkit moved away"
  seed_json_doctor doctor-env doctor --compile --json
  seed_json_doctor doctor-env-deepspeed doctor --json --for deepspeed
  TORCH_EXTENSIONS_DIR=$work/ext-env seed_json fusedadam-env "$py" -m envlock run -p "$prefix" -- "$py" "$helper" fusedadam
  log "C. the same env without libcusparse-dev (runtime-only headers)"
  seed_json removed "$py" "$helper" remove-package "$prefix" libcusparse-dev
  seed_json_doctor doctor-runtime-only doctor --json
  TORCH_EXTENSIONS_DIR=$work/ext-runtime-only seed_json fusedadam-runtime-only "$py" -m envlock run -p "$prefix" -- "$py" "$helper" fusedadam
  restore_toolkit
  "$py" "$helper" record-fusedadam "$work" "$out/$day-deepspeed-fusedadam.json"
  "$py" "$helper" record-runtime-only "$work" "$out/$day-deepspeed-runtime-only.json"
  rm -f "$work/env.done"  # the env lost libcusparse-dev: an ops-env phase on this machine re-creates it
}
# doctor through `envlock run` (the env's activation, no conda): its --json document is the result
seed_json_doctor() {
  local name=$1; shift; local t0; t0=$(date +%s%N)
  run "$py" -m envlock run -p "$prefix" -- "$py" -m envlock "$@" > "$work/$name.json" 2> "$work/$name.err"; local rc=$?
  took "$name" "$t0"
  log "$name: exit $rc $("$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("summary"), [f["code"] for f in d["findings"] if f["severity"] in ("error","warning")])' "$work/$name.json" 2>&1 | head -c 600)"
}

phase_ops_system() {
  setup || return 1
  log "the gpu-marked tests (doctor's GPU-target checks; the channel builder on this toolkit): ~30 s"
  timed gpu-tests "$py" -m pytest -q -s -p no:cacheprovider -m gpu tests/test_doctor_gpu.py tests/test_toolkit_channel.py > "$out/gpu-tests.txt" 2>&1
  log "every DeepSpeed op against the system toolkit ($toolkit)"
  seed_json sweep-system "$py" "$helper" sweep "$out/ops-system.json" --parallel "${SEED_PARALLEL:-4}" --budget "$(sweep_budget)" ${SEED_OPS:+--ops "$SEED_OPS"}
}

phase_ops_env() {
  setup || return 1
  rm -f "$work/env.done"  # a fresh env: the env phase removed libcusparse-dev from its copy
  make_env || return 1
  hide_toolkit
  log "every DeepSpeed op in the envlock env, system toolkit moved away"
  seed_json sweep-env "$py" -m envlock run -p "$prefix" -- "$py" "$helper" sweep "$out/ops-env.json" \
    --parallel "${SEED_PARALLEL:-4}" --budget "$(sweep_budget)" ${SEED_OPS:+--ops "$SEED_OPS"}
  restore_toolkit
  if [ -f "$out/ops-system.json" ]; then "$py" "$helper" merge-ops "$out/ops-system.json" "$out/ops-env.json" "$out/$day-deepspeed-ops.json"; fi
}

rc=0
case "$phase" in
  env) phase_env || rc=1 ;;
  ops-system) phase_ops_system || rc=1 ;;
  ops-env) phase_ops_env || rc=1 ;;
  all)  # no per-command limit: each part gets its own budget
    for part in phase_env phase_ops_system phase_ops_env; do
      deadline=$(( $(date +%s) + ${SEED_PHASE_BUDGET_S:-900} )); $part || rc=1
    done ;;
  restore) restore_toolkit ;;
  *) echo "usage: $0 prepare|env|ops-system|ops-env|all|restore|merge A B OUT" >&2; exit 2 ;;
esac
restore_toolkit
cp "$work/log.txt" "$out/$phase-steps.txt" 2>/dev/null
ls -la "$out"
exit $rc
