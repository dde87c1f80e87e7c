// kiln-demo: CUDA kernel and launcher for out = alpha * x + y.
//
// Only light headers are included here (no <torch/extension.h>, no
// <ATen/ATen.h>) so that the device compile stays fast: the launcher works on
// at::TensorBase, which at::Tensor derives from.

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/TensorBase.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

#include "kiln_demo.h"

namespace kiln_demo {
namespace {

constexpr int kThreads = 256;

template <typename scalar_t>
__global__ void scale_add_kernel(const scalar_t* __restrict__ x,
                                 const scalar_t* __restrict__ y,
                                 scalar_t* __restrict__ out,
                                 at::opmath_type<scalar_t> alpha,
                                 int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    const opmath_t xv = static_cast<opmath_t>(x[i]);
    const opmath_t yv = static_cast<opmath_t>(y[i]);
    out[i] = static_cast<scalar_t>(alpha * xv + yv);
  }
}

}  // namespace

void scale_add_launch(const at::TensorBase& x, const at::TensorBase& y,
                      double alpha, const at::TensorBase& out) {
  const int64_t n = out.numel();
  if (n == 0) {
    return;
  }
  const c10::cuda::CUDAGuard device_guard(out.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  const int64_t max_blocks = 65535;
  const int blocks = static_cast<int>(
      std::min<int64_t>((n + kThreads - 1) / kThreads, max_blocks));

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(),
      "kiln_demo_scale_add", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        scale_add_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
            x.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
            out.mutable_data_ptr<scalar_t>(), static_cast<opmath_t>(alpha), n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

}  // namespace kiln_demo
