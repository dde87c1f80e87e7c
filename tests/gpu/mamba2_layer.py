"""A small random Mamba-2 model from transformers, with or without mamba-ssm's and causal-conv1d's kernels.

transformers resolves ``causal_conv1d_fn``, ``causal_conv1d_update``, ``mamba_chunk_scan_combined``,
``mamba_split_conv1d_scan_combined`` and ``selective_state_update`` when ``modeling_mamba2`` is
imported: from the installed ``causal_conv1d`` and ``mamba_ssm`` packages if they import, else from
its torch reference code, warning "... is falling back to its reference PyTorch implementation" on
first use. ``hide_kernels()`` makes both packages unimportable (before transformers is imported) to
get that fallback on purpose. NemotronH, Falcon-H1, Granite 4.0-H and Zamba2 take the same kernels.

Run as a script, it builds the model, times a prefill (one forward over --tokens tokens) and a
greedy decode (--new tokens, one at a time, with the cache) and writes a JSON line (and optionally
the prefill's logits) for the caller to compare:

    python mamba2_layer.py --mode kernels|fallback [--tokens 4096] [--new 64] [--save out.pt]
"""

import argparse
import json
import logging
import time

from fallback_probe import WarningCapture, hide_packages

KERNEL_PACKAGES = ("causal_conv1d", "causal_conv1d_cuda", "mamba_ssm", "selective_scan_cuda")
# Names of GPU kernels that only the fast path launches: causal-conv1d's CUDA kernels and
# mamba-ssm's Triton kernels for the SSD chunk scan and the one-token state update.
FAST_KERNEL_MARKERS = ("causal_conv1d", "_chunk_scan_fwd", "_chunk_state_fwd", "_selective_scan_update")


def hide_kernels():
    hide_packages(KERNEL_PACKAGES)


def build_model(seed=0):
    """Two Mamba-2 layers with a Mamba2-2.7B-like head layout (64 heads of 64, 8 groups, state 128)."""
    import torch
    from transformers import Mamba2Config, Mamba2ForCausalLM

    config = Mamba2Config(vocab_size=4096, hidden_size=2048, num_hidden_layers=2, state_size=128,
                          expand=2, head_dim=64, num_heads=64, n_groups=8, conv_kernel=4, chunk_size=256)
    torch.manual_seed(seed)
    model = Mamba2ForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    return model.to(device="cuda", dtype=torch.bfloat16).eval()


def timed(fn, repeats):
    import torch
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[0], times[len(times) // 2]


def run(mode, tokens=4096, new=64, repeats=5, save=None):
    if mode == "fallback":
        hide_kernels()
    import torch
    import transformers

    capture = WarningCapture()
    logging.getLogger("transformers").addHandler(capture)
    transformers.logging.set_verbosity_warning()

    model = build_model()
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device="cuda")
    prompt = ids[:, :128]

    def decode():
        return model.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False)

    with torch.no_grad():
        logits = model(ids, use_cache=False).logits  # warm-up: Triton compiles here
        decode()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model(ids, use_cache=False)
            model.generate(prompt, max_new_tokens=2, min_new_tokens=2, do_sample=False)
            torch.cuda.synchronize()
        kernels = sorted({e.key for e in prof.key_averages()})
        prefill_min, prefill_median = timed(lambda: model(ids, use_cache=False), repeats)
        decode_min, decode_median = timed(decode, max(1, repeats // 2))
        generated = decode()[0, 128:].tolist()
    if save:
        torch.save({"logits": logits.float().cpu(), "generated": generated}, save)
    fallback_warnings = [m for m in capture.messages if "falling back" in m]
    return {
        "mode": mode,
        "tokens": tokens,
        "new_tokens": new,
        "dtype": "bfloat16",
        "layers": model.config.num_hidden_layers,
        "hidden_size": model.config.hidden_size,
        "prefill_ms_min": prefill_min,
        "prefill_ms_median": prefill_median,
        "prefill_tok_s": tokens / (prefill_median / 1000),
        "decode_ms_per_token": decode_median / new,
        "decode_tok_s": new / (decode_median / 1000),
        "fallback_warnings": fallback_warnings,
        "fast_kernels": [k for k in kernels if any(marker in k for marker in FAST_KERNEL_MARKERS)],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["kernels", "fallback"], required=True)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--save")
    args = parser.parse_args()
    started = time.monotonic()
    result = run(args.mode, args.tokens, args.new, args.repeats, args.save)
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
