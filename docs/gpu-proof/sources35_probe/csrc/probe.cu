// Issue 35.5's probe (docs/gpu-proof/sources_job.py): a JIT extension that needs NCCL and cuSPARSELt, the two
// groups beside the toolkit that pip torch's own distributed and sparse kernels use. Both libraries are called,
// then a kernel runs on the GPU.
#include <torch/extension.h>
#include <nccl.h>
#include <cusparseLt.h>
#include <string>

__global__ void add_one(float* x, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

std::string run_probe(torch::Tensor t) {
  int nccl = 0;
  ncclGetVersion(&nccl);
  cusparseLtHandle_t handle;
  cusparseStatus_t init = cusparseLtInit(&handle);
  int lt = 0;
  cusparseLtGetVersion(&handle, &lt);
  cusparseLtDestroy(&handle);
  int64_t n = t.numel();
  add_one<<<static_cast<unsigned>((n + 255) / 256), 256>>>(t.data_ptr<float>(), n);
  return "nccl " + std::to_string(nccl) + ", cusparseLt " + std::to_string(lt) + " (init " + std::to_string(static_cast<int>(init)) + ")";
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run_probe", &run_probe); }
