"""Which CUDA toolkit headers each DeepSpeed JIT op includes: writes envlock/data/deepspeed_ops.yaml.

The table is an output of envlock's source scanner (envlock/sources/, the `deepspeed` profile of
data/profiles.yaml), the same code `envlock doctor --for deepspeed-0.19.8.tar.gz` runs; nothing of DeepSpeed
is imported or run, and no torch is needed:

    python3 -m pip download deepspeed==0.19.8 --no-deps --no-binary :all: -d /tmp/ds
    python tools/deepspeed_op_headers.py /tmp/ds/deepspeed-0.19.8.tar.gz > envlock/data/deepspeed_ops.yaml

Each op builder class of op_builder/ is read with `ast` (its sources(), include_paths(), extra_ldflags());
every `#include` of those files is followed through DeepSpeed's own tree, with the #if conditions a Linux
CUDA build decides (envlock/sources/cpp.py); what is not in the tree is an outside header, and the CUDA
toolkit's among them are kept, with the envlock group (data/extras.yaml) that ships each.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from envlock.sources.classify import source_tables
from envlock.sources.profiles import profiles
from envlock.sources.reader import read_sources
from envlock.sources.scan import scan


def table(path: Path) -> str:
    m = re.search(r"deepspeed-(\d[\w.]*?)(?:\.tar\.gz|\.zip|\.tgz)?$", path.name)
    if not m:
        raise SystemExit(f"{path}: not a deepspeed-VERSION sdist or folder")
    version = m.group(1)
    result = scan(read_sources(path), source_tables(), profiles()["deepspeed"])
    ops: dict[str, dict] = {}
    for unit in result.units:
        cuda = [n for n in unit.needs if n.what == "header" and n.provider.kind == "cuda" and not n.via.startswith("through")]
        groups = {n.provider.group for n in cuda if n.provider.group}
        row: dict = {
            "builder": unit.builder,
            "cuda_headers": sorted(n.name for n in cuda),
            "needs": sorted(groups),
            "torch_cuda_headers": any(h.startswith(("ATen/cuda/", "c10/cuda/")) for h in unit.outside),
        }
        if "cutlass" in " ".join(unit.outside):
            row["needs_cutlass"] = True
        if unit.note:
            row["note"] = unit.note
        ops[unit.name] = row
    head = (
        f"# DeepSpeed {version}'s JIT ops (CUDA builders of op_builder/all_ops.py) and the CUDA toolkit headers\n"
        "# their sources include, directly or through DeepSpeed's own headers. `needs`: the envlock `--with`\n"
        "# groups (data/extras.yaml) beyond the default set; `torch_cuda_headers`: it also includes torch's\n"
        "# ATen/cuda or c10/cuda headers (so torch's set: cusparse.h, cublas_v2.h, ... applies).\n"
        f"# Made by tools/deepspeed_op_headers.py from the deepspeed-{version} sdist; do not edit by hand.\n"
    )
    doc = {"schema_version": 1, "deepspeed": version, "ops": dict(sorted(ops.items()))}
    return head + yaml.safe_dump(doc, sort_keys=False, width=110)


if __name__ == "__main__":
    sys.stdout.write(table(Path(sys.argv[1]).resolve()))
