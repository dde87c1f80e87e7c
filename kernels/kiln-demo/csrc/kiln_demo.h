// kiln-demo: declarations shared by the binding (.cpp) and the kernel (.cu).
#pragma once

#include <ATen/core/TensorBase.h>

namespace kiln_demo {

// out = alpha * x + y, elementwise. x, y and out must be contiguous CUDA
// tensors of the same dtype (float64/float32/float16/bfloat16), shape and
// device; out must already be allocated. Runs on the current CUDA stream.
void scale_add_launch(const at::TensorBase& x, const at::TensorBase& y,
                      double alpha, const at::TensorBase& out);

}  // namespace kiln_demo
