#!/bin/bash
# How docs/gpu-proof/*.json were made: run from the repo root on a GPU machine with torch (CUDA build) and
# a full system CUDA toolkit, no network. Writes into ${OUT:-./gpu-proof-out}.
#   A  envlock doctor --compile --json                      (expect: no errors, load_inline builds and runs)
#   B  same with CUDA_HOME = a symlink copy of the toolkit without cuSPARSE headers (the seed failure)
#   C  same as A with NVCC_PREPEND_FLAGS=-ccbin=$CXX and CC set (conda-forge cuda-nvcc + torch's -ccbin $CC)
#   D  envlock doctor --json with an older libnvJitLink and the toolkit's lib dirs first on LD_LIBRARY_PATH
set -u
out=${OUT:-./gpu-proof-out}; mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then   # wheels the machine lacks (platformdirs), never rattler/conda-lock
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
doctor() { python3 -m envlock doctor "$@"; }

wrap() {  # wrap(name, label, command...): run, keep the JSON inside {date, machine, command, result}
  local name=$1 label=$2; shift 2
  local start=$(date +%s.%N)
  "$@" > "$out/$name.raw" 2> "$out/$name.err"; local rc=$?
  python3 - "$out/$name" "$label" "$rc" "$start" "$*" <<'PY'
import json, os, platform, subprocess, sys, time, datetime
base, label, rc, start, cmd = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError as exc:
    smi = f"no nvidia-smi ({exc})"
raw = open(base + ".raw").read()
try:
    result = json.loads(raw)
except ValueError:
    result = {"unparsed_stdout": raw[-4000:]}
doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "machine": {"gpu": smi, "kernel": platform.release(), "python": sys.version.split()[0],
                   "lent_kind": "nvidia-h200"},
       "what": label, "command": cmd, "exit_code": rc, "wall_seconds": round(time.time() - start, 1),
       "stderr_tail": open(base + ".err").read()[-1500:], "result": result}
json.dump(doc, open(base + ".json", "w"), indent=2)
os.remove(base + ".raw"); os.remove(base + ".err")
s = result.get("summary")
print(f"== {os.path.basename(base)}: exit {rc}, {s}")
for f in result.get("findings", []):
    if f["severity"] != "ok" or f["code"].startswith("compile."):
        print(f"   {f['severity']:7} {f['code']}: {f['message'][:400]}")
PY
}

{
  echo "== facts"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, typer; print('torch', torch.__version__, torch.version.cuda, 'typer', typer.__version__)"
  echo "nvcc: $(command -v nvcc) -> $(readlink -f "$(command -v nvcc)")"; nvcc --version | tail -2
  echo "CUDA_HOME=${CUDA_HOME-<unset>} LD_LIBRARY_PATH=${LD_LIBRARY_PATH-<unset>} CC=${CC-<unset>} CXX=${CXX-<unset>}"
  gcc --version | head -1
} 2>&1 | tee "$out/facts.txt"

wrap doctor-green "system CUDA + torch: doctor --compile" doctor --compile --json

# B: the seed failure (../shared/recipes/seed-failure-on-gpu.sh's link farm; the real toolkit is untouched).
real=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
farm=$(mktemp -d)/cuda-no-cusparse
cp -as "$real" "$farm"; rm -f "$farm/bin/nvcc"; cp "$real/bin/nvcc" "$farm/bin/nvcc"
inc=$(readlink -f "$real/include"); lib=$(readlink -f "$real/targets/x86_64-linux/lib")
rm -rf "$farm/include" "$farm/targets"; mkdir -p "$farm/include" "$farm/targets/x86_64-linux/include"
for f in "$inc"/*; do ln -s "$f" "$farm/include/"; ln -s "$f" "$farm/targets/x86_64-linux/include/"; done
ln -s "$lib" "$farm/targets/x86_64-linux/lib"
rm -f "$farm"/include/cusparse* "$farm"/targets/x86_64-linux/include/cusparse*
echo "farm: $farm ($(find -L "$farm/include" "$farm/targets" -name cusparse.h | wc -l) cusparse.h left)"
wrap doctor-no-cusparse "CUDA_HOME=toolkit copy without cuSPARSE headers: doctor --compile" \
  env CUDA_HOME="$farm" python3 -m envlock doctor --compile --json

wrap doctor-ccbin "NVCC_PREPEND_FLAGS=-ccbin=g++ plus CC=gcc: doctor --compile" \
  env NVCC_PREPEND_FLAGS="-ccbin=$(command -v g++)" CC="$(command -v gcc)" CXX="$(command -v g++)" \
  python3 -m envlock doctor --compile --json

# D: a real older libnvJitLink (13.0 GA wheel, carried as .whl/old/*.whl) first on LD_LIBRARY_PATH.
oldlib=""
if ls .whl/old/nvidia_nvjitlink-*.whl >/dev/null 2>&1; then
  mkdir -p /tmp/old-site && python3 -m zipfile -e .whl/old/nvidia_nvjitlink-*.whl /tmp/old-site && oldlib=/tmp/old-site/nvidia/cu13/lib:
fi
wrap doctor-ldpath "an older libnvJitLink and the toolkit's lib dirs prepended to LD_LIBRARY_PATH: doctor" \
  env LD_LIBRARY_PATH="$oldlib$real/lib64:$real/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  python3 -m envlock doctor --json
ls -la "$out"
