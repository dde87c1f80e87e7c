// kiln-demo: Python bindings; the build names the module (TORCH_EXTENSION_NAME: kiln_demo_cuda).

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>  // the at::Tensor caster alone: not <torch/extension.h>
#include <torch/version.h>
#include <cuda_runtime_api.h>

#include <string>

#include "kiln_demo.h"

#ifndef KILN_DEMO_VERSION
#define KILN_DEMO_VERSION "0.1.0"
#endif

#define KILN_DEMO_CHECK_CUDA(t) TORCH_CHECK((t).is_cuda(), #t " must be a CUDA tensor")

namespace {

at::Tensor scale_add(const at::Tensor& x, const at::Tensor& y, double alpha) {
  KILN_DEMO_CHECK_CUDA(x);
  KILN_DEMO_CHECK_CUDA(y);
  TORCH_CHECK(x.device() == y.device(),
              "x and y must be on the same device, got ", x.device(), " and ", y.device());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(),
              "x and y must have the same dtype, got ", x.scalar_type(), " and ", y.scalar_type());
  TORCH_CHECK(x.sizes() == y.sizes(),
              "x and y must have the same shape, got ", x.sizes(), " and ", y.sizes());
  const auto st = x.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kHalf || st == at::kBFloat16 || st == at::kDouble,
              "unsupported dtype ", st, " (expected float32, float16, bfloat16 or float64)");

  const at::Tensor xc = x.contiguous();
  const at::Tensor yc = y.contiguous();
  at::Tensor out = at::empty_like(xc, at::MemoryFormat::Contiguous);
  kiln_demo::scale_add_launch(xc, yc, alpha, out);
  return out;
}

std::string version() { return KILN_DEMO_VERSION; }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "kiln-demo: a tiny CUDA extension used as kiln's end-to-end fixture";
  m.def("scale_add", &scale_add, "out = alpha * x + y (CUDA)",
        py::arg("x"), py::arg("y"), py::arg("alpha") = 1.0);
  m.def("version", &version, "version of the kiln-demo extension");
  // What the binary was compiled against, for smoke tests that compare it
  // with the torch/CUDA found at run time.
  m.attr("TORCH_VERSION") = TORCH_VERSION;
  m.attr("CUDART_VERSION") = CUDART_VERSION;
}
