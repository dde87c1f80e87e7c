"""kiln-demo: a tiny CUDA extension used as kiln's end-to-end fixture.

``scale_add(x, y, alpha)`` computes ``alpha * x + y`` with a CUDA kernel from
the compiled module ``kiln_demo_cuda``; ``scale_add_ref`` is the same in plain
torch, for tests.
"""

from __future__ import annotations

import torch  # must come first: loads libc10/libtorch that kiln_demo_cuda links against

import kiln_demo_cuda as _C

__all__ = ["__version__", "scale_add", "scale_add_ref", "version"]

__version__ = "0.1.0"


def version() -> str:
    """Version string compiled into the extension module."""
    return _C.version()


def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Return ``alpha * x + y`` computed by the CUDA kernel.

    ``x`` and ``y`` must be CUDA tensors of the same shape, device and dtype
    (float32, float16, bfloat16 or float64). The result is a new contiguous
    tensor; half and bfloat16 are computed in float32 and rounded once.
    """
    return _C.scale_add(x, y, float(alpha))


def scale_add_ref(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Pure-torch reference for :func:`scale_add` (same rounding: one cast at the end)."""
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype} and {y.dtype}")
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    out = float(alpha) * x.to(compute) + y.to(compute)
    return out.to(x.dtype).contiguous()
