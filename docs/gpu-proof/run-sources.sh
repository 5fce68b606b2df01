#!/bin/bash
# Issue 35.5 on a fresh GPU machine (torch with CUDA and pip's nvidia-nccl / nvidia-cusparselt wheels, a system
# CUDA toolkit, no network): builds predicted by `envlock doctor --for`, in envlock envs with the toolkit moved
# away (docs/gpu-proof/sources_job.py says what and how).
#
#   docs/gpu-proof/run-sources.sh prepare   # on a connected machine: the wheels and sdists it carries into
#                                           # .whl-35/ (from the index pip is configured with; SRC35_TARGET_PY: 3.12)
#   docs/gpu-proof/run-sources.sh gpu       # ~7 min on an H100/H200 (16 cores): channel, two envs, doctor, builds;
#                                           # records in ${OUT:-./gpu-proof-out}; a budget of EXT_BUDGET_S (560)
#                                           # keeps it under a 10-minute command
#   docs/gpu-proof/run-sources.sh restore   # put back a toolkit a killed run left moved away
# Knobs: EXT_WORK (/tmp/src35-work), EXT_TOOLKIT (readlink -f /usr/local/cuda), EXT_PYTHON (python3).
set -uo pipefail
phase=${1:-gpu}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
py=${EXT_PYTHON:-python3}
if [ "$phase" = prepare ]; then
  target=${SRC35_TARGET_PY:-3.12}
  "$py" -m pip download -q -d .whl-35 --python-version "$target" --platform manylinux_2_28_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --only-binary :all: \
    py-rattler==0.28.0 zstandard platformdirs packaging || exit 1
  "$py" -m tests.sdists .whl-35 causal-conv1d==1.7.0 torch-sparse==0.6.18 || exit 1
  # apex has no sdist on the index: the `git archive` its profile names (tools/project_profiles.py fetch apex)
  "$py" tools/project_profiles.py fetch apex || exit 1
  cp "${ENVLOCK_SDIST_CACHE:-$HOME/.cache/envlock-sdists}/apex-6424da3b.tar.gz" .whl-35/ || exit 1
  du -sh .whl-35; ls .whl-35
  exit 0
fi
if [ "$phase" = restore ]; then exec "$py" docs/gpu-proof/sources_job.py restore; fi
out=${OUT:-./gpu-proof-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
"$py" docs/gpu-proof/sources_job.py run "$out" .whl-35 2>&1 | tee -a "$out/sources.log"
rc=${PIPESTATUS[0]}
"$py" docs/gpu-proof/sources_job.py restore
exit "$rc"
