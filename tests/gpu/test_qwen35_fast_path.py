"""transformers' Qwen3.5 Gated DeltaNet layer runs the installed kernels, not its torch fallback.

Each mode runs in its own interpreter (transformers picks the implementation when it
imports the model): with the kernels, no fallback warning is logged and the CUDA
profile shows causal-conv1d's and fla's kernels; with the kernel packages hidden, the
warnings appear and those kernels do not (so the check itself can fail). Both layers
compute the same function: their outputs agree to bfloat16 accuracy.
"""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.qwen3_5")

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))


def run_layer(mode, tmp_path, tokens=2048):
    out = tmp_path / f"{mode}.pt"
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "qwen35_layer.py"), "--mode", mode, "--tokens", str(tokens),
         "--repeats", "3", "--save", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), torch.load(out)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qwen35")
    return run_layer("kernels", tmp), run_layer("fallback", tmp)


def test_kernels_are_used(both):
    (fast, _), _ = both
    assert fast["fallback_warnings"] == [], fast["fallback_warnings"]
    assert any("causal_conv1d" in k for k in fast["fast_kernels"]), fast["fast_kernels"]
    assert any("causal_conv1d" not in k for k in fast["fast_kernels"]), "no fla kernel ran"


def test_fallback_is_detected(both):
    _, (slow, _) = both
    assert any("causal_conv1d_fn" in m for m in slow["fallback_warnings"]), slow["fallback_warnings"]
    assert any("chunk_gated_delta_rule" in m for m in slow["fallback_warnings"]), slow["fallback_warnings"]
    assert slow["fast_kernels"] == []


def test_same_function(both):
    (_, fast_out), (_, slow_out) = both
    assert fast_out.shape == slow_out.shape
    assert torch.isfinite(fast_out).all()
    err = (fast_out.double() - slow_out.double()).pow(2).mean().sqrt() / slow_out.double().pow(2).mean().sqrt()
    assert err.item() < 3e-2, f"relative RMS difference {err.item():.2e}"
