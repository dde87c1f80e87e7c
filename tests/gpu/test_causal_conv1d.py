"""GPU smoke test for kiln's causal-conv1d wheel.

Runs ``causal_conv1d_fn`` (forward and backward) and ``causal_conv1d_update`` on
random inputs against a float64 reference written here from the operator's
definition, not from the package's own reference code. The backward pass covers
every (input dtype, weight dtype) pair in both layouts: those are the 18 explicit
instantiations of ``causal_conv1d_bwd.cu``, which kiln compiles in shards, so a
shard lost at link time fails here.

Skipped when there is no CUDA device; a missing or broken extension is a failure.
"""

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Inputs are rounded to the dtype first; the reference then runs in float64, so the
# tolerance covers the kernel's float32 accumulation (--use_fast_math) and one rounding
# of the output to the dtype.
OUT_TOL = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.float16: dict(atol=3e-3, rtol=3e-3),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
}
# Gradients of the weight sum over batch x length terms: looser, relative to their scale.
GRAD_TOL = {
    torch.float32: dict(atol=1e-3, rtol=1e-3),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
    torch.bfloat16: dict(atol=6e-2, rtol=5e-2),
}


def reference_conv(x, weight, bias, activation, initial_states=None):
    """out[b, d, t] = bias[d] + sum_k weight[d, k] * x[b, d, t - (width - 1) + k], in float64."""
    x64, w64 = x.double(), weight.double()
    width = weight.shape[1]
    if initial_states is None:
        padded = F.pad(x64, (width - 1, 0))
    else:
        padded = torch.cat([initial_states.double(), x64], dim=-1)
    out = F.conv1d(padded, w64.unsqueeze(1), None if bias is None else bias.double(), groups=x.shape[1])
    return F.silu(out) if activation in ("silu", "swish") else out


def random(shape, dtype, gen, scale=1.0):
    return (torch.randn(shape, device="cuda", dtype=torch.float32, generator=gen) * scale).to(dtype)


def conv_input(batch, dim, seqlen, dtype, gen, channel_last):
    """x of shape (batch, dim, seqlen); channel-last: a transposed view of (batch, seqlen, dim)."""
    if channel_last:
        return random((batch, seqlen, dim), dtype, gen).transpose(1, 2)
    return random((batch, dim, seqlen), dtype, gen)


def assert_close_scaled(actual, expected, tol):
    """assert_close with atol scaled to the reference's magnitude (sums of many terms)."""
    scale = max(expected.abs().max().item(), 1.0)
    torch.testing.assert_close(actual.double(), expected, atol=tol["atol"] * scale, rtol=tol["rtol"])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("seqlen", [1, 7, 128, 1000, 4096])
@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("channel_last", [False, True])
def test_forward_matches_reference(dtype, width, seqlen, activation, channel_last):
    gen = torch.Generator(device="cuda").manual_seed(seqlen * 10 + width)
    batch, dim = 2, 256 + 8
    x = conv_input(batch, dim, seqlen, dtype, gen, channel_last)
    weight = random((dim, width), dtype, gen, 0.5)
    bias = random((dim,), dtype, gen)
    out = causal_conv1d_fn(x, weight, bias, activation=activation)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.double(), reference_conv(x, weight, bias, activation), **OUT_TOL[dtype])


@pytest.mark.parametrize("itype", DTYPES, ids=str)
@pytest.mark.parametrize("wtype", DTYPES, ids=str)
@pytest.mark.parametrize("channel_last", [False, True])
def test_backward_every_instantiation(itype, wtype, channel_last):
    """Each (input, weight) dtype pair x layout is one instantiation in causal_conv1d_bwd.cu."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    batch, dim, seqlen, width = 2, 128, 512, 4
    x = conv_input(batch, dim, seqlen, itype, gen, channel_last)
    weight = random((dim, width), wtype, gen, 0.5)
    bias = random((dim,), wtype, gen)
    dout = random((batch, dim, seqlen), itype, gen)
    x.requires_grad_(True)
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    out = causal_conv1d_fn(x, weight, bias, activation="silu")
    out.backward(dout)

    x64 = x.detach().double().requires_grad_(True)
    w64 = weight.detach().double().requires_grad_(True)
    b64 = bias.detach().double().requires_grad_(True)
    ref = reference_conv(x64, w64, b64, "silu")
    ref.backward(dout.double())

    coarse = itype if wtype == torch.float32 else wtype
    coarse = torch.bfloat16 if torch.bfloat16 in (itype, wtype) else coarse
    torch.testing.assert_close(out.double(), ref.detach(), **OUT_TOL[coarse])
    assert x.grad.dtype == itype and weight.grad.dtype == wtype
    assert_close_scaled(x.grad, x64.grad, GRAD_TOL[coarse])
    assert_close_scaled(weight.grad, w64.grad, GRAD_TOL[coarse])
    assert_close_scaled(bias.grad, b64.grad, GRAD_TOL[coarse])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("width", [2, 3, 4])
def test_initial_and_final_states(dtype, width):
    gen = torch.Generator(device="cuda").manual_seed(3)
    batch, dim, seqlen = 2, 64, 300
    # States need the channel-last layout.
    x = random((batch, seqlen, dim), dtype, gen).transpose(1, 2)
    init = random((batch, width - 1, dim), dtype, gen).transpose(1, 2)
    weight = random((dim, width), dtype, gen, 0.5)
    out, final = causal_conv1d_fn(x, weight, None, initial_states=init, return_final_states=True, activation=None)
    torch.testing.assert_close(out.double(), reference_conv(x, weight, None, None, init), **OUT_TOL[dtype])
    torch.testing.assert_close(final, x[:, :, -(width - 1):])


def reference_update(x, conv_state, weight, bias, activation, cache_seqlens=None):
    """One decoding step (or a few) against a rolling or circular conv state, in float64."""
    squeeze = x.dim() == 2
    if squeeze:
        x = x.unsqueeze(-1)
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state = conv_state.double()
    state_len = state.shape[-1]
    if cache_seqlens is None:
        window = torch.cat([state, x.double()], dim=-1)
        new_state = window[:, :, -state_len:]
    else:
        idx = torch.arange(-(width - 1), 0, device=x.device).unsqueeze(0) + cache_seqlens.unsqueeze(1)
        idx = torch.remainder(idx, state_len).unsqueeze(1).expand(-1, dim, -1)
        window = torch.cat([state.gather(2, idx), x.double()], dim=-1)
        copy_idx = torch.arange(seqlen, device=x.device).unsqueeze(0) + cache_seqlens.unsqueeze(1)
        copy_idx = torch.remainder(copy_idx, state_len).unsqueeze(1).expand(-1, dim, -1)
        new_state = state.clone().scatter_(2, copy_idx, x.double())
    out = F.conv1d(window, weight.double().unsqueeze(1), None if bias is None else bias.double(), groups=dim)
    out = out[:, :, -seqlen:]
    if activation in ("silu", "swish"):
        out = F.silu(out)
    return (out.squeeze(-1) if squeeze else out), new_state


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("seqlen", [None, 1, 4])
@pytest.mark.parametrize("circular", [False, True])
def test_update_matches_reference(dtype, width, seqlen, circular):
    gen = torch.Generator(device="cuda").manual_seed(width * 100 + (seqlen or 0))
    batch, dim, state_len = 3, 2048 + 16, width - 1 + 4
    x = random((batch, dim) if seqlen is None else (batch, dim, seqlen), dtype, gen)
    conv_state = random((batch, dim, state_len), dtype, gen)
    weight = random((dim, width), dtype, gen, 0.5)
    bias = random((dim,), dtype, gen)
    cache_seqlens = (
        torch.randint(0, 1024, (batch,), device="cuda", dtype=torch.int32, generator=gen) if circular else None
    )
    ref_out, ref_state = reference_update(x, conv_state, weight, bias, "silu", cache_seqlens)
    out = causal_conv1d_update(x, conv_state, weight, bias, activation="silu", cache_seqlens=cache_seqlens)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.double(), ref_out, **OUT_TOL[dtype])
    # The state is updated in place, exactly (a copy, no arithmetic).
    torch.testing.assert_close(conv_state.double(), ref_state, atol=0, rtol=0)


def test_rejects_bad_inputs():
    x = torch.randn(2, 64, 16, device="cuda")
    with pytest.raises(RuntimeError):
        causal_conv1d_fn(x, torch.randn(64, 5, device="cuda"))  # width 5 is not supported
    with pytest.raises((RuntimeError, NotImplementedError)):
        causal_conv1d_fn(x, torch.randn(64, 4, device="cuda"), activation="relu")
