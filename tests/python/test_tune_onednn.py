"""The fx_fused whole-model strategy (portkit.tune.onednn + the attention rewrite): Linear layers
on oneDNN's linear with reordered weights and fused epilogues give eager's outputs, fall back to
torch's ops where autograd needs them, survive torch.save, follow in-place weight edits, and an
fx_fused plan saves, loads with one call and comes back from the bank. Behaviour only, never
speed (bench/tune_torch_bench.py measures that)."""
import io
import json
import os
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, ROOT)

import portkit.tune as pt  # noqa: E402
from portkit.tune import candidates as cands  # noqa: E402
from portkit.tune import onednn  # noqa: E402
from examples.tune import models  # noqa: E402

needs_onednn = pytest.mark.skipif(not onednn.available(), reason="needs torch >= 2.0 with oneDNN's linear")


def _close(a, b):
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def _rewritten(module, inputs):
    gm = torch.fx.symbolic_trace(module)
    return gm, onednn.rewrite_linears(gm, inputs)


def _round_trip(module):
    """torch.save, then torch.load (full unpickling: a saved GraphModule holds code)."""
    buf = io.BytesIO()
    torch.save(module, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)  # tests that call this run on torch 2.x only


def _packed(gm):
    return [m for m in gm.modules() if isinstance(m, onednn.PackedLinear)]


class Acts(torch.nn.Module):
    """One Linear per activation form the rewrite fuses, and forms it must leave alone."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(16, 24), torch.nn.Linear(24, 24), torch.nn.Linear(24, 24)
        self.d, self.e, self.f = torch.nn.Linear(24, 24), torch.nn.Linear(24, 24), torch.nn.Linear(24, 24)
        self.g = torch.nn.Linear(24, 8)
        self.relu, self.silu = torch.nn.ReLU(), torch.nn.SiLU()
        self.shift = torch.nn.Parameter(torch.randn(24))

    def forward(self, x):
        x = self.relu(self.a(x))                      # module activation
        x = F.gelu(self.b(x), approximate="tanh")     # tanh GELU
        x = self.silu(self.c(x))                      # swish
        x = torch.sigmoid(self.d(x)).tanh()           # function, then a method (not fused: d's output is used once)
        y = self.e(x)
        x = y + torch.relu(y)                         # two users: nothing fused into e
        x = self.f(x) + self.shift                    # broadcast add: not a residual, not fused
        return self.g(x)


@needs_onednn
def test_every_linear_is_rewritten_and_activations_fused_where_safe():
    torch.manual_seed(0)
    model, x = Acts().eval(), torch.randn(5, 16)
    want = model(x)
    gm, n = _rewritten(model, (x,))
    assert n == 7
    by_name = {name.split("_onednn")[0]: m for name, m in gm.named_children() if isinstance(m, onednn.PackedLinear)}
    assert by_name["a"].epilogue == "relu" and by_name["c"].epilogue == "swish"
    assert (by_name["b"].epilogue, by_name["b"].algorithm) == ("gelu", "tanh")
    assert by_name["d"].epilogue == "sigmoid"
    assert by_name["e"].epilogue == "none" and not by_name["e"].residual
    assert by_name["f"].epilogue == "none" and not by_name["f"].residual
    assert "torch.relu" in gm.code and "add" in gm.code  # the unfused forms stay in the graph
    with torch.no_grad():
        assert _close(gm(x), want)
    # Other batch sizes than the reorder's hint (5), and a 3-D input.
    for shape in ((3, 16), (2, 7, 16), (1, 16)):
        xi = torch.randn(*shape)
        with torch.no_grad():
            assert _close(gm(xi), model(xi)), shape


@needs_onednn
def test_encoder_gets_sdpa_fused_epilogues_and_residual_adds():
    torch.manual_seed(1)
    model, x = models.make_encoder(dim=32, heads=2, ffn=64), torch.randn(2, 8, 32)
    gm = cands.build_fx_fused(model, (x,))
    packed = {name.split("_onednn")[0]: m for name, m in gm.named_children() if isinstance(m, onednn.PackedLinear)}
    assert set(packed) == {"qkv", "proj", "fc1", "fc2"}
    assert packed["fc1"].epilogue == "gelu"
    assert packed["proj"].residual and packed["fc2"].residual  # x + proj(y), x + fc2(...)
    assert "gelu" not in gm.code and "softmax" not in gm.code
    if cands._sdpa_available():
        assert "scaled_dot_product_attention" in gm.code
    with torch.no_grad():
        assert pt.outputs_match(gm(x), model(x))[0]
        xi = torch.randn(3, 5, 32)
        assert pt.outputs_match(gm(xi), model(xi))[0]


@needs_onednn
def test_autograd_falls_back_to_torch_ops_with_the_same_gradient():
    torch.manual_seed(2)
    model, x = models.make_mlp(32, 64), torch.randn(4, 32)
    gm, _ = _rewritten(model, (x,))
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # oneDNN's op has no autograd kernel: it must not be reached
        gm(xa).square().sum().backward()
    model(xb).square().sum().backward()
    assert _close(xa.grad, xb.grad)
    # Grad enabled but nothing requires it: the fast path, same values.
    assert _close(gm(x), model(x).detach())


@needs_onednn
def test_torch_save_round_trip_and_in_place_weight_edits():
    torch.manual_seed(3)
    model, x = models.make_mlp(32, 64), torch.randn(4, 32)
    gm, _ = _rewritten(model, (x,))
    loaded = _round_trip(gm)  # the opaque reordered weights are not written: the plain ones are
    with torch.no_grad():
        assert _close(loaded(x), model(x))
        # Edit the plain weights in place, on the original and the copy alike: the copy reorders again.
        for lin, pl in zip([m for m in model.modules() if isinstance(m, torch.nn.Linear)], _packed(loaded)):
            lin.weight.mul_(0.5)
            pl.weight.mul_(0.5)
        assert _close(loaded(x), model(x))


def test_fx_fused_does_not_apply_without_onednn_and_sdpa():
    model, x = models.make_mlp(32, 64), torch.randn(4, 32)
    if onednn.available():
        assert len(_packed(cands.build_fx_fused(model, (x,)))) == 4
        with pytest.raises(ValueError, match="no written-out attention and no fp32 Linear"):
            cands.build_fx_fused(torch.nn.Sequential(torch.nn.ReLU()), (x,))
    else:
        with pytest.raises(ValueError, match="needs torch >= 2.0 with oneDNN"):
            cands.build_fx_fused(model, (x,))


@needs_onednn
def test_an_fx_fused_plan_saves_loads_and_comes_back_from_the_bank(tmp_path, monkeypatch):
    from test_tune_sgat import FAST, _joint_setup

    d, _, _ = _joint_setup(monkeypatch, {"fx_fused@%dt" % torch.get_num_threads(): 0.5})
    torch.manual_seed(4)
    model, inputs = models.make_encoder(dim=32, heads=2, ffn=64), (torch.randn(2, 8, 32),)
    bank, out = str(tmp_path / "bank"), tmp_path / "out"
    try:
        _, report = pt.optimize(model, inputs, bank=bank, output=str(out), **dict(FAST, threads=None))
        assert (report["plan"]["strategy"], report["plan"]["threads"]) == ("fx_fused", d)
        doc = json.loads((out / "optimized.json").read_text())
        assert doc["strategy"] == "fx_fused" and doc["module"] == "optimized_module.pt"
        loaded = pt.load(str(out))
        assert len(_packed(loaded)) == 4
        xi = torch.randn(3, 8, 32)
        with torch.no_grad():
            assert pt.outputs_match(loaded(xi), model(xi))[0]
            # optimized.pt: TorchScript without oneDNN's opaque weights, for torch.jit.load.
            assert pt.outputs_match(torch.jit.load(str(out / "optimized.pt"))(xi), model(xi))[0]
        torch.set_num_threads(d)
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"] == report["plan"] and second["builds"] == {}
        assert len(_packed(pt.load(str(tmp_path / "out2")))) == 4
    finally:
        torch.set_num_threads(d)


@needs_onednn
def test_loaded_where_onednn_is_missing_it_runs_torch_ops(monkeypatch):
    torch.manual_seed(5)
    model, x = models.make_mlp(32, 64), torch.randn(4, 32)
    gm, _ = _rewritten(model, (x,))
    monkeypatch.setattr(onednn, "available", lambda: False)  # while loading
    loaded = _round_trip(gm)
    assert all(p._packed is None for p in _packed(loaded))
    with torch.no_grad():
        assert _close(loaded(x), model(x))
