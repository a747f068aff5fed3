"""autograd.nn: registration and state, train/eval, layer semantics against float64 numpy
references, gradient checks through LSTM and attention, and a tiny transformer that learns."""

from __future__ import annotations

import numpy as np
import pytest

import autograd as ag
from autograd import F, nn, tensor, use_policy
from autograd.gradcheck import numerical_grads

RNG = np.random.default_rng(3)


def mlp():
    ag.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(5, 2))


def test_registration_names_and_state_dict_keys_follow_torch():
    m = mlp()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"]
    assert list(m.state_dict()) == names + ["1.running_mean", "1.running_var",
                                            "1.num_batches_tracked"]
    assert m[0].weight.shape == (5, 4)                 # Linear weight is out x in
    assert len(m.parameters()) == 6 and len(m) == 5
    bound = 1 / np.sqrt(4)
    assert np.all(np.abs(m[0].weight.data) <= bound) and np.all(np.abs(m[0].bias.data) <= bound)
    assert "Linear(in_features=4, out_features=5, bias=True)" in repr(m)


def test_state_dict_round_trip_and_errors():
    a, b = mlp(), mlp()
    for p in b.parameters():
        p.data = p.data + 1.0
    b.load_state_dict(a.state_dict())
    for (_, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(pa.data, pb.data)
    sd = a.state_dict()
    sd["0.weight"] = np.zeros((4, 5))
    with pytest.raises(ValueError, match=r"0.weight has shape \(4, 5\)"):
        b.load_state_dict(sd)
    with pytest.raises(ValueError, match="missing keys"):
        b.load_state_dict({"0.weight": np.zeros((5, 4))})
    b.load_state_dict({"0.weight": np.zeros((5, 4))}, strict=False)
    assert not b[0].weight.data.any()


def test_train_eval_switch_dropout_and_batch_norm():
    m = mlp()
    x = tensor(RNG.standard_normal((8, 4)))
    m.train()
    y1, y2 = m(x), m(x)
    assert not np.array_equal(y1.data, y2.data)        # fresh dropout masks each call
    m.eval()
    assert not m[3].training and not m[1].training
    assert np.array_equal(m(x).data, m(x).data)
    rm = m[1].running_mean.data.copy()
    m(x)
    assert np.array_equal(rm, m[1].running_mean.data)  # eval does not update statistics


def test_zero_grad_and_attribute_rules():
    m = mlp()
    F.sum(m(tensor(RNG.standard_normal((3, 4))))).backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    with pytest.raises(TypeError, match="parameter 'weight'"):
        m[0].weight = np.zeros((5, 4))
    m[0].bias = None
    assert len(m[0].parameters()) == 1
    with pytest.raises(ValueError, match="in_features must be a positive int"):
        nn.Linear(0, 3)


def test_dropout_modules_with_the_same_seed_agree():
    a, b = nn.Dropout(0.5, seed=9), nn.Dropout(0.5, seed=9)
    x = tensor(np.ones((6, 6)))
    first = a(x).data
    assert np.array_equal(first, b(x).data)
    assert not np.array_equal(first, a(x).data)        # the next call draws a new mask


def _conv_ref(x, w, b, s, p):
    n, _, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
    out = np.zeros((n, oc, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * s:i * s + kh, j * s:j * s + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w) + b
    return out


def test_conv2d_and_pooling_layers_match_loops():
    with use_policy("fp64"):
        conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
        x = RNG.standard_normal((2, 2, 7, 6))
        y = conv(tensor(x))
        ref = _conv_ref(x, conv.weight.data, conv.bias.data, 2, 1)
        np.testing.assert_allclose(y.data, ref, rtol=1e-12, atol=1e-12)
        mp = nn.MaxPool2d(2)(tensor(x)).data
        np.testing.assert_array_equal(mp, x[:, :, :6, :6].reshape(2, 2, 3, 2, 3, 2).max((3, 5)))
        ap = nn.AvgPool2d(2)(tensor(x)).data
        np.testing.assert_allclose(ap, x[:, :, :6, :6].reshape(2, 2, 3, 2, 3, 2).mean((3, 5)))
        assert nn.Flatten()(tensor(x)).shape == (2, 84)


def _lstm_ref(x, params, h):
    w_ih, w_hh, b_ih, b_hh = params
    ht, ct, outs = np.zeros((x.shape[1], h)), np.zeros((x.shape[1], h)), []

    def sig(z):
        return 1 / (1 + np.exp(-z))

    for t in range(x.shape[0]):
        g = x[t] @ w_ih.T + b_ih + ht @ w_hh.T + b_hh
        i, f, gg, o = sig(g[:, :h]), sig(g[:, h:2 * h]), np.tanh(g[:, 2 * h:3 * h]), \
            sig(g[:, 3 * h:])
        ct = f * ct + i * gg
        ht = o * np.tanh(ct)
        outs.append(ht)
    return np.stack(outs), ht, ct


def test_lstm_matches_reference_and_backpropagates():
    with use_policy("fp64"):
        ag.manual_seed(2)
        lstm = nn.LSTM(3, 4, num_layers=2)
        x = RNG.standard_normal((5, 2, 3))
        out, (hn, cn) = lstm(tensor(x))
        p0 = [getattr(lstm, f"{k}_l0").data for k in ("weight_ih", "weight_hh", "bias_ih",
                                                       "bias_hh")]
        p1 = [getattr(lstm, f"{k}_l1").data for k in ("weight_ih", "weight_hh", "bias_ih",
                                                       "bias_hh")]
        o0, h0, c0 = _lstm_ref(x, p0, 4)
        o1, h1, c1 = _lstm_ref(o0, p1, 4)
        np.testing.assert_allclose(out.data, o1, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(hn.data, np.stack([h0, h1]), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(cn.data, np.stack([c0, c1]), rtol=1e-12, atol=1e-14)
        bf = nn.LSTM(3, 4, batch_first=True)
        assert bf(tensor(x.transpose(1, 0, 2)))[0].shape == (2, 5, 4)
    ag.check_grads(lambda t: lstm(t)[0], x[:3])
    _check_param_grads(lambda: lstm(tensor(x[:3], fmt="fp64"))[0], lstm.weight_hh_l0)


def _check_param_grads(run, param):
    """Central differences with respect to one parameter of a module (float64)."""
    with use_policy("fp64"):
        out = run()
        v = RNG.standard_normal(out.shape)
        param.grad = None
        out.backward(v)
        base = param.data.copy()

        def f(w):
            param.data = w.data
            return run()
        num = numerical_grads(f, [base], v)[0]
        param.data = base
    np.testing.assert_allclose(param.grad, num, rtol=1e-5, atol=1e-7)


def test_self_attention_matches_reference_and_is_causal():
    with use_policy("fp64"):
        ag.manual_seed(4)
        att = nn.MultiheadSelfAttention(6, 2)
        x = RNG.standard_normal((2, 4, 6))
        y = att(tensor(x)).data
        wq, wk, wv = np.split(att.in_proj_weight.data, 3)
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        heads = []
        for hh in range(2):
            sl = slice(3 * hh, 3 * hh + 3)
            s = q[..., sl] @ np.swapaxes(k[..., sl], 1, 2) / np.sqrt(3)
            a = np.exp(s - s.max(-1, keepdims=True))
            heads.append((a / a.sum(-1, keepdims=True)) @ v[..., sl])
        ref = np.concatenate(heads, -1) @ att.out_proj.weight.data.T
        np.testing.assert_allclose(y, ref, rtol=1e-11, atol=1e-12)
        x2 = x.copy()
        x2[:, 3] += 1.0                                    # change only the last position
        yc, yc2 = att(tensor(x), causal=True).data, att(tensor(x2), causal=True).data
        np.testing.assert_array_equal(yc[:, :3], yc2[:, :3])
        assert not np.allclose(yc[:, 3], yc2[:, 3])
    ag.check_grads(lambda t: att(t, causal=True), x[:1])
    _check_param_grads(lambda: att(tensor(x[:1], fmt="fp64")), att.in_proj_weight)
    with pytest.raises(ValueError, match="not divisible"):
        nn.MultiheadSelfAttention(6, 4)


def test_tiny_transformer_learns_to_copy_the_previous_token():
    ag.manual_seed(5)
    vocab, d, t = 6, 16, 5
    emb = nn.Embedding(vocab, d)
    pos = nn.Embedding(t, d)
    block = nn.TransformerEncoderLayer(d, 2, dim_feedforward=32, dropout=0.0, norm_first=True)
    head = nn.Linear(d, vocab)
    params = emb.parameters() + pos.parameters() + block.parameters() + head.parameters()
    data = np.random.default_rng(0).integers(0, vocab, (32, t))
    losses = []
    for _ in range(60):
        h = emb(data) + pos(np.arange(t))
        logits = head(block(h, causal=True))
        loss = F.cross_entropy(F.reshape(logits[:, 1:], (-1, vocab)), data[:, :-1].reshape(-1))
        for p in params:
            p.grad = None
        loss.backward()
        for p in params:
            p.data = p.data - np.float32(0.5) * p.grad
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_batchnorm_num_batches_tracked_and_cumulative_momentum():
    """num_batches_tracked counts training batches (not evaluation ones), is saved in
    state_dict as a 0-d int64 and restored; momentum=None is the cumulative average (torch),
    so after k batches running_mean is the mean of the k batch means."""
    rng = np.random.default_rng(5)
    bn = nn.BatchNorm1d(3, momentum=None)
    means = []
    for _ in range(4):
        x = rng.standard_normal((8, 3)) * 2 + 1
        means.append(x.mean(axis=0))
        bn(ag.Tensor(x))
    assert bn.num_batches_tracked == 4
    np.testing.assert_allclose(bn.running_mean.data, np.mean(means, axis=0), rtol=1e-6)
    bn.eval()
    bn(ag.Tensor(rng.standard_normal((8, 3))))
    assert bn.num_batches_tracked == 4
    sd = bn.state_dict()
    assert sd["num_batches_tracked"].dtype == np.int64 and sd["num_batches_tracked"] == 4
    other = nn.BatchNorm1d(3, momentum=None)
    other.load_state_dict(sd)
    assert other.num_batches_tracked == 4
    with pytest.raises(ValueError, match="non-negative integer"):
        other.load_state_dict({**sd, "num_batches_tracked": np.array(-1)})
    with pytest.raises(ValueError, match="missing keys"):
        other.load_state_dict({k: v for k, v in sd.items() if k != "num_batches_tracked"})
    with pytest.raises(ValueError, match="momentum"):
        nn.BatchNorm1d(3, momentum=1.5)
    # Without running statistics there is no counter, as in torch.
    assert "num_batches_tracked" not in nn.BatchNorm1d(3, track_running_stats=False).state_dict()
