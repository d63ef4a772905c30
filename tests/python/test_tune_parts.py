"""Per-part strategies run eagerly: composite_eager (each subgraph of the fx split finished on its
own, fx_fused and ONNX Runtime among the subgraph strategies) and the blocks of a model torch.fx
cannot trace whole, tuned separately. The winners are forced by a stand-in measurement (these
tests check behaviour, never speed); ONNX Runtime tests skip when it is not installed."""
import json
import os
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import portkit.tune as pt  # noqa: E402
from portkit.tune import blocks as blocks_mod  # noqa: E402
from portkit.tune import candidates as cands  # noqa: E402
from portkit.tune import sgat  # noqa: E402
from examples.tune import models  # noqa: E402
from test_tune_sgat import FAST, _close, _eager, _joint_setup  # noqa: E402


class Layer(torch.nn.Module):
    """A transformer-style layer called with keyword constants and returning a tuple, as
    ``transformers`` layers are."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, 2 * dim)
        self.fc2 = torch.nn.Linear(2 * dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x, mask=None, scale=1.0, output_extra=False):
        h = self.fc2(torch.relu(self.fc1(x))) * scale
        if mask is not None:
            h = h * mask
        y = self.norm(x + h)
        return (y, h) if output_extra else (y,)


class Untraceable(torch.nn.Module):
    """Data-dependent Python at the top (torch.fx cannot trace it), blocks below, one of them
    called twice (not a block: its children are looked at), one returning a dict."""

    def __init__(self, dim=16):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(dim), Layer(dim)])
        self.shared = Layer(dim)
        self.head = DictHead(dim)

    def forward(self, x, output_extra=False):
        if float(x.abs().sum()) > 1e9:
            return {"out": x}
        for layer in self.layers:
            x = layer(x, scale=0.5, output_extra=output_extra)[0]
        x = self.shared(self.shared(x)[0])[0]
        return self.head(x)


class DictHead(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.GELU())

    def forward(self, x):
        return {"out": self.proj(x)}


def test_find_blocks_takes_flat_calls_and_descends_elsewhere():
    model, x = Untraceable().eval(), torch.randn(2, 4, 16)
    found, skipped = blocks_mod.find_blocks(model, (x,))
    assert [b.path for b in found] == ["layers.0", "layers.1", "head.proj"]
    assert skipped["shared"] == "called 2 times" and "not a tensor" in skipped["head"]
    assert all(b.traced for b in found)  # concrete keyword constants: fx traces each layer
    layer = found[0]
    assert layer.spec.tensor_params == ["x"]
    assert layer.spec.constants == {"mask": None, "scale": 0.5, "output_extra": False}
    with torch.no_grad():
        want = model.layers[0](x, scale=0.5)[0]
        assert _close(layer.module(*layer.inputs), model.layers[0](layer.inputs[0], scale=0.5)[0])
        # BlockCall: the recorded call runs the tuned module, any other the original block.
        call = blocks_mod.BlockCall(cands.build_part("script_freeze", layer.module, layer.inputs), model.layers[0],
                                    layer.spec)
        assert _close(call(x, scale=0.5)[0], want)
        other = call(x, scale=0.5, output_extra=True)
        assert len(other) == 2 and _close(other[1], model.layers[0](x, scale=0.5, output_extra=True)[1])
        assert _close(call(x, scale=2.0)[0], model.layers[0](x, scale=2.0)[0])
        assert _close(call(x[:1], scale=0.5)[0], model.layers[0](x[:1], scale=0.5)[0])


def test_blocks_of_an_untraceable_model_are_tuned_separately(tmp_path, monkeypatch):
    d = torch.get_num_threads()
    _joint_setup(monkeypatch, {"script_freeze": 0.5, "blocks@%dt" % d: 0.3})
    model, inputs = Untraceable().eval(), (torch.randn(2, 4, 16),)
    bank, out = str(tmp_path / "bank"), str(tmp_path / "out")
    try:
        _, report = pt.optimize(model, inputs, bank=bank, output=out, **dict(FAST, threads=None))
        assert [b["path"] for b in report["blocks"]] == ["layers.0", "layers.1", "head.proj"]
        assert any("blocks are tuned separately: 3 blocks" in n for n in report["notes"])
        assert {r["submod"]: r["strategy"] for r in report["subgraphs"]} == {
            "layers.0": "script_freeze", "layers.1": "script_freeze", "head.proj": "script_freeze"}
        assert report["plan"]["strategy"] == "blocks"
        assert report["plan"]["subgraphs"] == {"layers.0": "script_freeze", "layers.1": "script_freeze",
                                               "head.proj": "script_freeze"}
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["artifact"] is None and doc["module"] == "optimized_module.pt" and "artifact_note" in doc
        loaded = pt.load(out)
        assert isinstance(loaded.layers[0], blocks_mod.BlockCall)
        assert isinstance(loaded.layers[0].tuned, cands.Finished)
        other = (torch.randn(2, 4, 16),)
        with torch.no_grad():
            assert _close(loaded(*other)["out"], model(*other)["out"])
            # A call the blocks were not tuned for runs the original blocks.
            assert _close(loaded(other[0], output_extra=True)["out"], model(other[0], output_extra=True)["out"])
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"] == report["plan"]
        assert second["repo_summary"]["repo_hit_num"] == second["repo_summary"]["total_num"]
    finally:
        torch.set_num_threads(d)


def test_a_model_without_blocks_stays_one_opaque_subgraph(tmp_path):
    class Opaque(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            return x if float(x.sum()) > 1e9 else self.fc(x)

    _, report = pt.optimize(Opaque().eval(), (torch.randn(2, 8),), bank=False, **FAST)
    assert any("whole model as one subgraph" in n for n in report["notes"]) and "blocks" not in report


def test_composite_eager_finishes_each_subgraph_on_its_own(tmp_path, monkeypatch):
    """composite_eager: the split model run eagerly with every subgraph finished by its own
    strategy; saved as a pickled module whose TorchScript parts reload from their bytes."""
    d = torch.get_num_threads()
    _joint_setup(monkeypatch, {"optimize_for_inference": 0.5, "composite_eager@%dt" % d: 0.3})
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    bank, out = str(tmp_path / "bank"), str(tmp_path / "out")
    try:
        _, report = pt.optimize(model, inputs, bank=bank, output=out, **dict(FAST, threads=None))
        chosen = {r["submod"]: r["strategy"] for r in report["subgraphs"]}
        assert set(chosen.values()) == {"optimize_for_inference"}
        assert report["plan"]["strategy"] == "composite_eager" and report["plan"]["subgraphs"] == chosen
        loaded = pt.load(out)
        assert isinstance(loaded, torch.fx.GraphModule)
        assert all(isinstance(getattr(loaded, n), cands.Finished) for n in chosen)
        other = (torch.randn(2, 3, 16, 16),)
        with torch.no_grad():
            assert _close(loaded(*other), _eager(model, other))
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"] == report["plan"]
    finally:
        torch.set_num_threads(d)


def test_eager_only_subgraph_strategies_run_on_torch_ops_inside_a_torchscript_composite():
    model, x = models.make_mlp(features=32, hidden=64).eval(), torch.randn(4, 32)
    cap = sgat.capture(model, (x,))
    cap.blocks = []
    sin = sgat.subgraph_inputs(cap.split, (x,))
    choices = {n: "fx_fused" for n in cap.names}
    ts = sgat._build_composite(cap, choices, sin, (x,))
    with torch.no_grad():
        assert _close(torch.jit.freeze(ts.eval())(x), model(x))


# ---- ONNX Runtime per part (skipped without onnxruntime) ----

def test_onnxruntime_per_subgraph_with_its_options_in_the_plan(tmp_path, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    d = torch.get_num_threads()
    _joint_setup(monkeypatch, {"onnxruntime": 0.3, "composite_eager@%dt" % d: 0.2,
                               "composite_eager@%dt" % (d + 1): 0.25})
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    bank, out = str(tmp_path / "bank"), str(tmp_path / "out")
    try:
        _, report = pt.optimize(model, inputs, bank=bank, output=out, **dict(FAST, threads=None))
        recs = report["subgraphs"]
        assert {r["strategy"] for r in recs} == {"onnxruntime"}
        for r in recs:  # its own settings searched at the subgraphs' count
            assert r["ort_options"]["intra_op_num_threads"] == report["subgraph_threads"]
            assert r["ort_options"]["graph_optimization_level"] in ("ORT_ENABLE_ALL", "ORT_ENABLE_EXTENDED")
        plan = report["plan"]
        assert plan["strategy"] == "composite_eager" and plan["threads"] == d
        assert set(plan["subgraph_options"]) == {r["submod"] for r in recs}
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["onnxruntime"] == ort.__version__ and doc["subgraph_options"] == plan["subgraph_options"]
        loaded = pt.load(out)
        parts = [getattr(loaded, r["submod"]) for r in recs]
        assert all(p.session.get_session_options().intra_op_num_threads == d for p in parts)
        other = (torch.randn(2, 3, 16, 16),)
        with torch.no_grad():
            assert _close(loaded(*other), _eager(model, other))
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"] == plan
    finally:
        torch.set_num_threads(d)


def _tiny_bert():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=32, vocab_size=64)
    return transformers.BertModel(cfg).eval(), (torch.randint(0, 64, (1, 8)),)


def test_transformer_fusions_are_searched_where_they_apply():
    pytest.importorskip("onnxruntime")
    from portkit.tune import ort

    if not ort.fusion_available():
        pytest.skip("onnxruntime.transformers needs the onnx package")
    model, inputs = _tiny_bert()
    found, _ = blocks_mod.find_blocks(model, inputs)
    layer = [b for b in found if b.path == "encoder.layer.0"][0]
    graph = ort.export(layer.module, layer.inputs)
    fused = [o for o, _ in ort.variants(graph, 1, ort.SUBGRAPH_SETTINGS) if o.get("fusion")]
    assert {o["fusion"] for o in fused} <= set(ort.FUSIONS) and fused
    mod, ms = ort.search(graph, layer.inputs, layer.module(*layer.inputs), 1, sgat.outputs_match,
                         lambda runs: {n: sgat.measure_interleaved({n: f}, rounds=2, warmup=0)[n]
                                       for n, f in runs.items()}, settings=ort.SUBGRAPH_SETTINGS)
    assert any("fused-" in n for n in ms) and ort.setting_name(mod.options) in ms


def test_blocks_of_a_transformers_model_on_onnxruntime(tmp_path, monkeypatch):
    """BERT (torch.fx cannot trace it whole): its embeddings, layers and pooler are blocks; with
    ONNX Runtime forced to win each, the plan runs them on sessions and reloads from the artifact."""
    ort = pytest.importorskip("onnxruntime")
    model, inputs = _tiny_bert()
    d = torch.get_num_threads()
    _joint_setup(monkeypatch, {"onnxruntime": 0.3, "blocks@%dt" % d: 0.2, "onnxruntime@%dt" % d: 0.5,
                               "onnxruntime@%dt" % (d + 1): 0.5})
    try:
        _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=None))
        assert [b["path"] for b in report["blocks"]] == ["embeddings", "encoder.layer.0", "encoder.layer.1", "pooler"]
        assert report["plan"]["strategy"] == "blocks"
        assert set(report["plan"]["subgraphs"].values()) == {"onnxruntime"}
        assert json.loads((tmp_path / "out" / "optimized.json").read_text())["onnxruntime"] == ort.__version__
        loaded = pt.load(str(tmp_path / "out"))
        ids = torch.randint(0, 64, (1, 8))
        with torch.no_grad():
            got, want = loaded(ids), model(ids)
        assert _close(got.last_hidden_state, want.last_hidden_state) and _close(got.pooler_output, want.pooler_output)
    finally:
        torch.set_num_threads(d)
