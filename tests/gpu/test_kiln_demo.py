"""GPU smoke test for the kiln-demo fixture (kernels/kiln-demo).

Needs torch with CUDA and the built ``kiln_demo`` package (``kiln_demo`` +
``kiln_demo_cuda``) importable. Skipped when there is no CUDA device; a missing
or broken extension is a failure, not a skip.
"""

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import kiln_demo  # noqa: E402  (after the CUDA check on purpose)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Both sides round once from float32 (float64 for float64); allow for FMA contraction.
TOL = {
    torch.float32: dict(atol=1e-6, rtol=1e-6),
    torch.float16: dict(atol=1e-3, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-2, rtol=1e-2),
    torch.float64: dict(atol=1e-12, rtol=1e-12),
}


def test_version():
    assert kiln_demo.version() == kiln_demo.__version__
    import kiln_demo_cuda

    # Built against the torch we run with (major.minor.patch, local label ignored).
    assert torch.__version__.split("+")[0] == kiln_demo_cuda.TORCH_VERSION
    assert kiln_demo_cuda.CUDART_VERSION // 1000 == int(torch.version.cuda.split(".")[0])


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(1,), (1000,), (3, 257, 129), (0,), (4096, 1024)], ids=str)
@pytest.mark.parametrize("alpha", [1.0, -0.5, 3.25])
def test_scale_add_matches_reference(dtype, shape, alpha):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
    y = torch.randn(shape, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
    out = kiln_demo.scale_add(x, y, alpha)
    ref = kiln_demo.scale_add_ref(x, y, alpha)
    assert out.dtype == dtype and out.shape == x.shape and out.device == x.device
    torch.testing.assert_close(out, ref, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_contiguous_inputs(dtype):
    x = torch.randn(64, 128, device="cuda").to(dtype).t()
    y = torch.randn(128, 64, device="cuda").to(dtype)[:, ::1]
    out = kiln_demo.scale_add(x, y, 2.0)
    assert out.is_contiguous()
    torch.testing.assert_close(out, kiln_demo.scale_add_ref(x, y, 2.0), **TOL[dtype])


def test_runs_on_current_stream():
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = kiln_demo.scale_add(x, y, 0.5)
    s.synchronize()
    torch.testing.assert_close(out, kiln_demo.scale_add_ref(x, y, 0.5))


def test_rejects_bad_inputs():
    x = torch.randn(8, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        kiln_demo.scale_add(x.cpu(), x.cpu(), 1.0)
    with pytest.raises(RuntimeError, match="same dtype"):
        kiln_demo.scale_add(x, x.half(), 1.0)
    with pytest.raises(RuntimeError, match="same shape"):
        kiln_demo.scale_add(x, torch.randn(9, device="cuda"), 1.0)
    with pytest.raises(RuntimeError, match="unsupported dtype"):
        kiln_demo.scale_add(x.int(), x.int(), 1.0)
