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

// One launcher per dtype, explicitly instantiated below. kiln may compile this file as several
// translation units ("shards", as it does with causal-conv1d's backward kernels): shard k of n
// (-DKILN_DEMO_SHARD=k -DKILN_DEMO_SHARDS=n) holds the instantiations numbered u % n == k, and
// shard 0 the dispatcher too. Without the defines it holds everything.
#ifndef KILN_DEMO_SHARDS
#define KILN_DEMO_SHARDS 1
#define KILN_DEMO_SHARD 0
#endif

template <typename scalar_t>
void scale_add_typed(const at::TensorBase& x, const at::TensorBase& y, double alpha,
                     const at::TensorBase& out, cudaStream_t stream, int blocks) {
  using opmath_t = at::opmath_type<scalar_t>;
  scale_add_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
      x.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
      out.mutable_data_ptr<scalar_t>(), static_cast<opmath_t>(alpha), out.numel());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

#define KILN_DEMO_LAUNCHER(T)                                                        \
  void scale_add_typed<T>(const at::TensorBase&, const at::TensorBase&, double, \
                          const at::TensorBase&, cudaStream_t, int)
extern template KILN_DEMO_LAUNCHER(double);
extern template KILN_DEMO_LAUNCHER(float);
extern template KILN_DEMO_LAUNCHER(at::Half);
extern template KILN_DEMO_LAUNCHER(at::BFloat16);
#if 0 % KILN_DEMO_SHARDS == KILN_DEMO_SHARD
template KILN_DEMO_LAUNCHER(double);
#endif
#if 1 % KILN_DEMO_SHARDS == KILN_DEMO_SHARD
template KILN_DEMO_LAUNCHER(float);
#endif
#if 2 % KILN_DEMO_SHARDS == KILN_DEMO_SHARD
template KILN_DEMO_LAUNCHER(at::Half);
#endif
#if 3 % KILN_DEMO_SHARDS == KILN_DEMO_SHARD
template KILN_DEMO_LAUNCHER(at::BFloat16);
#endif

#if KILN_DEMO_SHARD == 0
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
      "kiln_demo_scale_add", [&] { scale_add_typed<scalar_t>(x, y, alpha, out, stream, blocks); });
}
#endif

}  // namespace kiln_demo
