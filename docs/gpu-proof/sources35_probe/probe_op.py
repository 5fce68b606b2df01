"""Issue 35.5's probe (docs/gpu-proof/sources_job.py): torch's JIT build of csrc/probe.cu, then its op on the GPU."""

import os

import torch
from torch.utils.cpp_extension import load

HERE = os.path.dirname(os.path.abspath(__file__))


def run() -> str:
    m = load(name="probe35", sources=[os.path.join(HERE, "csrc", "probe.cu")], extra_ldflags=["-lnccl", "-lcusparseLt"],
             verbose=True)
    t = torch.zeros(1000, device="cuda")
    said = m.run_probe(t)
    torch.cuda.synchronize()
    assert t.sum().item() == 1000.0, t.sum().item()
    return "probe35 " + said + ", kernel ok"
