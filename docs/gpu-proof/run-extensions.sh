#!/bin/bash
# Issue 27 on a fresh GPU machine (torch with CUDA, a system CUDA toolkit, no network): real projects' CUDA
# extensions in three setups against `envlock doctor --for SDIST` (docs/gpu-proof/extensions_job.py says how).
#
#   docs/gpu-proof/run-extensions.sh prepare      # on a connected machine: wheels + sdists into .whl-ext/ from
#                                                 # the index pip is configured with (EXT_TARGET_PY: 3.12)
#   docs/gpu-proof/run-extensions.sh gpu          # ~6 min on an H200 (16 cores): setup, (a), (b), (c) and the
#                                                 # records in ${OUT:-./gpu-proof-out}; a phase budget of
#                                                 # EXT_BUDGET_S (560) keeps it under a 10-minute command
#   docs/gpu-proof/run-extensions.sh gpu system   # one setup at a time (system | base | with), for a machine
#                                                 # whose per-command limit is shorter: a later call on the same
#                                                 # machine reuses what an earlier one left in $EXT_WORK
#   docs/gpu-proof/run-extensions.sh restore      # put back a toolkit a killed run left moved away
# Knobs: EXT_PROJECTS (a,b: only these), EXT_SKIP_BUILDS=1, EXT_NO_HIDE=1 and EXT_TORCH=VERSION (a rehearsal on
# a machine without a GPU or torch, whose toolkit others use), EXT_TOOLKIT (default: readlink -f /usr/local/cuda), EXT_WORK (/tmp/ext-work), EXT_PYTHON.
set -uo pipefail
phase=${1:-gpu}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
py=${EXT_PYTHON:-python3}
if [ "$phase" = prepare ]; then
  target=${EXT_TARGET_PY:-3.12}
  "$py" -m pip download -q -d .whl-ext --python-version "$target" --platform manylinux_2_28_x86_64 \
    --platform manylinux2014_x86_64 --only-binary :all: py-rattler==0.28.0 zstandard platformdirs hjson pydantic || exit 1
  "$py" -m tests.sdists .whl-ext deepspeed==0.19.8 chamferdist==1.0.3 warp-rnnt==0.7.0 nerfacc==0.5.3 || exit 1
  du -sh .whl-ext; ls .whl-ext
  exit 0
fi
if [ "$phase" = restore ]; then exec "$py" docs/gpu-proof/extensions_job.py restore; fi
out=${OUT:-./gpu-proof-out}; mkdir -p "$out"
setups=${2:-system,base,with}
export PYTHONUNBUFFERED=1
"$py" docs/gpu-proof/extensions_job.py run "$out" .whl-ext --setups "$setups" 2>&1 | tee -a "$out/extensions.log"
rc=${PIPESTATUS[0]}
"$py" docs/gpu-proof/extensions_job.py restore
exit "$rc"
