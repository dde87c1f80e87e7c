"""transformers' Mamba-2 layers run the installed mamba-ssm and causal-conv1d kernels, not the torch fallback.

Each mode runs in its own interpreter (transformers picks the implementation when it imports the
model): with the kernels, no fallback warning is logged and the CUDA profile shows causal-conv1d's
and mamba-ssm's kernels; with the kernel packages hidden, the warnings appear and those kernels do
not (so the check itself can fail). Both models compute the same function: their logits agree to
bfloat16 accuracy.
"""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.mamba2")

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))


def run_model(mode, tmp_path, tokens=1024):
    out = tmp_path / f"{mode}.pt"
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "mamba2_layer.py"), "--mode", mode, "--tokens", str(tokens),
         "--new", "8", "--repeats", "2", "--save", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), torch.load(out)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mamba2")
    return run_model("kernels", tmp), run_model("fallback", tmp)


def test_kernels_are_used(both):
    (fast, _), _ = both
    assert fast["fallback_warnings"] == [], fast["fallback_warnings"]
    assert any("causal_conv1d" in k for k in fast["fast_kernels"]), fast["fast_kernels"]
    assert any("_chunk_scan_fwd" in k for k in fast["fast_kernels"]), fast["fast_kernels"]
    assert any("_selective_scan_update" in k for k in fast["fast_kernels"]), fast["fast_kernels"]


def test_fallback_is_detected(both):
    _, (slow, _) = both
    for name in ("causal_conv1d_fn", "mamba_chunk_scan_combined", "selective_state_update"):
        assert any(name in m for m in slow["fallback_warnings"]), (name, slow["fallback_warnings"])
    assert slow["fast_kernels"] == []


def test_same_function(both):
    (_, fast_out), (_, slow_out) = both
    a, b = fast_out["logits"], slow_out["logits"]
    assert a.shape == b.shape
    assert torch.isfinite(a).all()
    err = (a - b).abs().max().item()
    scale = b.abs().max().item()
    assert err <= 0.05 * scale + 0.05, (err, scale)
