"""Tensor Core ops under a policy are softfloat's GEMMs, bit for bit: matmul, linear and conv2d
(through im2col) forward and backward against softfloat.tensorcore.gemm and the DFP-16 GEMM of
softfloat.dfp; and an O2 training step runs end to end with instrumentation on."""

from __future__ import annotations

import numpy as np
import pytest

import autograd as ag
import softfloat as sf
from autograd import F, Parameter, get_policy, nn, tensor, use_policy
from autograd.instrument import Recorder
from softfloat import dfp
from softfloat import tensorcore as tc

RNG = np.random.default_rng(5)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint32), b.view(np.uint32))


def r16(x):
    return np.asarray(sf.round(np.asarray(x), "fp16"))


def gemm(a, b, c=None, model="v100", in_format="fp16"):
    return np.asarray(tc.gemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c, model=model,
                              in_format=in_format, acc_format="fp32"))


# fp32 activations keep the raw accumulator output, so the op output IS tc.gemm's result.
V100_FP32_OUT = get_policy("O1", accumulation="v100", activation_format="fp32",
                           gradient_format="fp32")


def test_matmul_under_v100_equals_tensorcore_gemm_bit_for_bit():
    a = RNG.standard_normal((9, 37)).astype(np.float32)
    b = RNG.standard_normal((37, 6)).astype(np.float32)
    with use_policy(V100_FP32_OUT):
        y = F.matmul(tensor(a, fmt="fp32"), tensor(b, fmt="fp32"))
    assert same_bits(y.data, gemm(r16(a), r16(b)))      # inputs rounded to fp16 by the op
    with use_policy("O3", accumulation="v100"):
        y16 = F.matmul(tensor(a), tensor(b))
    assert same_bits(y16.data, r16(gemm(r16(a), r16(b))))


def test_matmul_backward_under_v100_uses_the_same_gemm():
    a = r16(RNG.standard_normal((5, 12)))
    b = r16(RNG.standard_normal((12, 4)))
    g = r16(RNG.standard_normal((5, 4)))
    with use_policy("O3", accumulation="v100"):
        ta, tb = tensor(a, requires_grad=True), tensor(b, requires_grad=True)
        F.matmul(ta, tb).backward(g)
    assert same_bits(ta.grad, r16(gemm(g, b.T)))
    assert same_bits(tb.grad, r16(gemm(a.T, g)))


def test_batched_matmul_is_one_gemm_per_batch():
    a = r16(RNG.standard_normal((3, 4, 8)))
    b = r16(RNG.standard_normal((8, 5)))
    with use_policy(V100_FP32_OUT):
        y = F.matmul(tensor(a), tensor(b))
    assert same_bits(y.data, np.stack([gemm(a[i], b) for i in range(3)]))


@pytest.mark.parametrize("model", ["a100", "h100", "ideal-fp32"])
def test_linear_puts_the_bias_in_the_accumulator(model):
    x = r16(RNG.standard_normal((6, 20)))
    w = r16(RNG.standard_normal((3, 20)))
    bias = r16(RNG.standard_normal(3))
    with use_policy(V100_FP32_OUT.replace(accumulation=model)):
        y = F.linear(tensor(x), tensor(w), tensor(bias))
    c = np.ascontiguousarray(np.broadcast_to(bias, (6, 3)), dtype=np.float32)
    assert same_bits(y.data, gemm(x, w.T, c, model=model))


def test_conv2d_is_the_gemm_of_its_im2col_matrix():
    x = r16(RNG.standard_normal((2, 3, 6, 5)))
    w = r16(RNG.standard_normal((4, 3, 3, 3)))
    with use_policy(V100_FP32_OUT):
        y = F.conv2d(tensor(x), tensor(w), stride=2, padding=1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    rows = [xp[n, :, i:i + 3, j:j + 3].reshape(-1)
            for n in range(2) for i in range(0, 6, 2) for j in range(0, 5, 2)]
    ref = gemm(np.stack(rows), w.reshape(4, -1).T).reshape(2, 3, 3, 4).transpose(0, 3, 1, 2)
    assert same_bits(y.data, np.ascontiguousarray(ref))


def test_bf16_policy_feeds_bf16_inputs_to_the_tensor_core():
    a = RNG.standard_normal((4, 16)).astype(np.float32)
    b = RNG.standard_normal((16, 3)).astype(np.float32)
    pol = get_policy("bf16", accumulation="a100", activation_format="fp32",
                     gradient_format="fp32")
    with use_policy(pol):
        y = F.matmul(tensor(a, fmt="fp32"), tensor(b, fmt="fp32"))
    ab, bb = (np.asarray(sf.round(v, "bf16")) for v in (a, b))
    assert same_bits(y.data, gemm(ab, bb, model="a100", in_format="bf16"))


def test_dfp16_policy_uses_the_dfp_gemm_forward_and_backward():
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    b = RNG.standard_normal((7, 3)).astype(np.float32)
    g = RNG.standard_normal((5, 3)).astype(np.float32)
    with use_policy("dfp16"):
        ta, tb = tensor(a, requires_grad=True), tensor(b, requires_grad=True)
        y = F.matmul(ta, tb)
        y.backward(g)
    q = dfp.quantize
    # The policy bounds int32 chains to one VNNI pair so no lane can wrap (autograd._backend).
    assert same_bits(y.data, dfp.gemm(q(a), q(b), chain_len=2))
    assert same_bits(ta.grad, dfp.gemm(q(g), q(np.ascontiguousarray(b.T)), chain_len=2))
    assert same_bits(tb.grad, dfp.gemm(q(np.ascontiguousarray(a.T)), q(g), chain_len=2))
    with pytest.raises(ValueError, match="no DFP-16 quantizer counterpart"):
        get_policy("dfp16", rounding="rtz")


def test_O2_training_step_with_master_weights_and_recording():
    ag.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5))
    params = model.parameters()
    masters = [p.data.copy() for p in params]
    model.set_policy("O2")
    x = RNG.standard_normal((8, 1, 6, 6))
    y = RNG.integers(0, 5, 8)
    scale = 2.0 ** 10
    losses = []
    with Recorder(model, formats=("fp16",)) as rec:
        for _ in range(8):
            out = model(x)
            assert out.fmt.name == "fp32"                  # apex O2: fp32 model outputs
            loss = F.cross_entropy(out, y)
            assert loss.fmt.name == "fp32"
            model.zero_grad()
            (loss * scale).backward()
            for p, m in zip(params, masters):
                m -= np.float32(0.1) * (p.grad / np.float32(scale))
                p.assign(m)
                assert same_bits(p.data, np.asarray(sf.round(m, p.fmt)))
            losses.append(loss.item())
            rec.step()
    assert losses[-1] < losses[0]
    assert rec.layers("weight_grad") == ["0", "1", "5"]
    assert model[1].weight.fmt.name == "fp32" and model[0].weight.fmt.name == "fp16"
    assert isinstance(model[5].weight, Parameter)
