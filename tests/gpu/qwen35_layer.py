"""One Qwen3.5 Gated DeltaNet layer from transformers, with or without the fast-path kernels.

transformers resolves ``causal_conv1d_fn``, ``causal_conv1d_update`` and
``chunk_gated_delta_rule`` when ``modeling_qwen3_5`` is imported: from the installed
``causal_conv1d`` and ``fla`` packages if they import, else from its torch reference
code, warning "... is falling back to its reference PyTorch implementation" on first
use. ``hide_kernels()`` makes both packages unimportable (before transformers is
imported) to get that fallback on purpose.

Run as a script, it builds the layer, runs it on one sequence and writes a JSON line
(and optionally the output tensor) for the caller to compare:

    python qwen35_layer.py --mode kernels|fallback [--tokens 8192] [--save out.pt]
"""

import argparse
import json
import logging
import time

from fallback_probe import WarningCapture, hide_packages

KERNEL_PACKAGES = ("causal_conv1d", "causal_conv1d_cuda", "fla")
# Names of GPU kernels that only the fast path launches (causal-conv1d's CUDA kernel,
# fla's Triton kernels for the chunked delta rule).
FAST_KERNEL_MARKERS = ("causal_conv1d", "chunk_gated_delta_rule", "chunk_fwd_kernel_o", "recompute_w_u")


def hide_kernels():
    hide_packages(KERNEL_PACKAGES)


def build_layer(hidden_size=4096, dtype=None, seed=0):
    """A Qwen3.5 linear-attention layer with its published head layout (16 key heads, 32 value heads, 128 dims)."""
    import torch
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    config = Qwen3_5TextConfig(
        hidden_size=hidden_size,
        num_hidden_layers=1,
        layer_types=["linear_attention"],
        linear_conv_kernel_dim=4,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
    )
    torch.manual_seed(seed)
    layer = Qwen3_5GatedDeltaNet(config, layer_idx=0)
    # Small weights keep activations in a sane range for a random layer.
    with torch.no_grad():
        for p in layer.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    return layer.to(device="cuda", dtype=dtype or torch.bfloat16).eval()


def run(mode, tokens=8192, repeats=20, save=None, profile=True):
    if mode == "fallback":
        hide_kernels()
    import torch
    import transformers

    capture = WarningCapture()
    logging.getLogger("transformers").addHandler(capture)
    transformers.logging.set_verbosity_warning()

    layer = build_layer()
    torch.manual_seed(1)
    x = torch.randn(1, tokens, layer.hidden_size, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        out = layer(x)  # warm-up: Triton compiles here
        torch.cuda.synchronize()
        kernels = []
        if profile:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                layer(x)
                torch.cuda.synchronize()
            kernels = sorted({e.key for e in prof.key_averages()})
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            layer(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    if save:
        torch.save(out.float().cpu(), save)
    times.sort()
    fallback_warnings = [m for m in capture.messages if "falling back" in m]
    fast_kernels = [k for k in kernels if any(marker in k for marker in FAST_KERNEL_MARKERS)]
    return {
        "mode": mode,
        "tokens": tokens,
        "dtype": "bfloat16",
        "hidden_size": layer.hidden_size,
        "repeats": repeats,
        "ms_min": times[0],
        "ms_median": times[len(times) // 2],
        "fallback_warnings": fallback_warnings,
        "fast_kernels": fast_kernels,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["kernels", "fallback"], required=True)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--save")
    args = parser.parse_args()
    started = time.monotonic()
    result = run(args.mode, args.tokens, args.repeats, args.save)
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
