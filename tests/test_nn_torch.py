"""PyTorch twins: with identical weights an MLP, a small CNN, an LSTM and a Transformer encoder
layer give the same forward values and gradients as PyTorch, in float64 (to rounding noise) and
fp32 (to fp32 accuracy).  Skipped cleanly where torch is not installed (it is optional)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd as ag  # noqa: E402
from autograd import F, nn, tensor, use_policy  # noqa: E402

RNG = np.random.default_rng(11)
# fp64: both sides compute the same math in float64 in different orders; fp32: both use fp32
# GEMMs with different blockings, so agreement is to a few fp32 ulps of the values involved.
TOL = {"fp64": {"rtol": 1e-10, "atol": 1e-12}, "fp32": {"rtol": 2e-4, "atol": 2e-5}}
TORCH_DTYPE = {"fp64": torch.float64, "fp32": torch.float32}


def twin(ours_builder, torch_model, policy):
    torch_model = torch_model.to(torch.float64 if policy == "fp64" else torch.float32)
    with use_policy(policy):
        ours = ours_builder()
    state = {k: v.detach().numpy() for k, v in torch_model.state_dict().items()}
    ours.load_state_dict(state)
    return ours, torch_model


def compare_grads(ours, theirs, policy):
    tp = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, tp[name].grad.numpy(), err_msg=name, **TOL[policy])


@pytest.mark.parametrize("policy", ["fp64", "fp32"])
def test_mlp_twin(policy):
    pol = "fp64" if policy == "fp64" else "O0"
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 12),
                             torch.nn.Tanh(), torch.nn.Linear(12, 10))
    ours, tm = twin(lambda: nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 12),
                                          nn.Tanh(), nn.Linear(12, 10)), tm, pol)
    x = RNG.standard_normal((32, 20))
    y = RNG.integers(0, 10, 32)
    with use_policy(pol):
        out = ours(tensor(x))
        loss = F.cross_entropy(out, y, label_smoothing=0.1)
        loss.backward()
    tx = torch.tensor(x, dtype=TORCH_DTYPE[policy])
    tout = tm(tx)
    tloss = torch.nn.functional.cross_entropy(tout, torch.tensor(y), label_smoothing=0.1)
    tloss.backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy(), **TOL[policy])
    np.testing.assert_allclose(loss.item(), tloss.item(), **TOL[policy])
    compare_grads(ours, tm, policy)


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x):
        h = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        h = torch.nn.functional.avg_pool2d(torch.relu(self.bn(self.c2(h))), 2)
        return self.fc(h.flatten(1))


class OurCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.c1(x)), 2)
        h = F.avg_pool2d(F.relu(self.bn(self.c2(h))), 2)
        return self.fc(F.reshape(h, (h.shape[0], -1)))


@pytest.mark.parametrize("policy", ["fp64", "fp32"])
def test_cnn_twin_train_and_eval(policy):
    pol = "fp64" if policy == "fp64" else "O0"
    torch.manual_seed(1)
    ours, tm = twin(OurCNN, TorchCNN(), pol)
    x = RNG.standard_normal((6, 1, 8, 8))
    y = RNG.integers(0, 5, 6)
    tx = torch.tensor(x, dtype=TORCH_DTYPE[policy])
    with use_policy(pol):
        out = ours(tensor(x))
        F.cross_entropy(out, y).backward()
    tout = tm(tx)
    torch.nn.functional.cross_entropy(tout, torch.tensor(y)).backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy(), **TOL[policy])
    compare_grads(ours, tm, policy)
    np.testing.assert_allclose(ours.bn.running_var.data, tm.bn.running_var.numpy(),
                               **TOL[policy])
    ours.eval()
    tm.eval()
    with use_policy(pol):
        ev = ours(tensor(x)).data
    np.testing.assert_allclose(ev, tm(tx).detach().numpy(), **TOL[policy])


def test_lstm_twin():
    torch.manual_seed(2)
    ours, tm = twin(lambda: nn.LSTM(3, 5, num_layers=2, batch_first=True),
                    torch.nn.LSTM(3, 5, num_layers=2, batch_first=True), "fp64")
    x = RNG.standard_normal((2, 6, 3))
    with use_policy("fp64"):
        xt = tensor(x, requires_grad=True)
        out, (_, cn) = ours(xt)
        (F.sum(out * out) + F.sum(cn)).backward()
    txt = torch.tensor(x, requires_grad=True)
    tout, (_, tcn) = tm(txt)
    ((tout * tout).sum() + tcn.sum()).backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy(), **TOL["fp64"])
    np.testing.assert_allclose(xt.grad, txt.grad.numpy(), **TOL["fp64"])
    compare_grads(ours, tm, "fp64")


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_twin(norm_first):
    torch.manual_seed(3)
    tl = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                          batch_first=True, norm_first=norm_first)
    ours, tl = twin(lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                       norm_first=norm_first), tl, "fp64")
    x = RNG.standard_normal((2, 5, 8))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    with use_policy("fp64"):
        out = ours(tensor(x), causal=True)
        F.sum(out * out).backward()
    tout = tl(torch.tensor(x), src_mask=mask, is_causal=True)
    (tout * tout).sum().backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy(), **TOL["fp64"])
    compare_grads(ours, tl, "fp64")


def test_gelu_layer_norm_and_embedding_match_torch():
    w = RNG.standard_normal((7, 4))
    idx = np.array([[1, 6, 1], [0, 2, 2]])
    with use_policy("fp64"):
        wt = tensor(w, requires_grad=True)
        y = F.gelu(F.layer_norm(F.embedding(idx, wt), (4,)))
        F.sum(y * y).backward()
    twt = torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.gelu(torch.nn.functional.layer_norm(
        torch.nn.functional.embedding(torch.tensor(idx), twt), (4,)))
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy(), **TOL["fp64"])
    np.testing.assert_allclose(wt.grad, twt.grad.numpy(), **TOL["fp64"])
    ag.manual_seed(0)
