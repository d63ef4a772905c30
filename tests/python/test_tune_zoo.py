"""Every model tunes or says why: a zoo of real architectures (random weights, tiny inputs) goes
through portkit.tune.optimize without an exception, and the saved artifact, loaded with one call,
equals eager within the tolerance.

The hand-written BatchNorm + activation CNN runs everywhere (no package); torchvision's and
transformers' models are skipped when the package is absent; nothing is downloaded (random
weights, configurations written here). The zoo is slow (minutes), so it runs only under its own
ctest entries (label ``zoo``) or with PORTKIT_TUNE_ZOO=1."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import portkit.tune as pt  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("PORTKIT_TUNE_ZOO") != "1",
                                reason="the model zoo runs under its own ctest entries (PORTKIT_TUNE_ZOO=1)")

# One thread, few rounds, no torch.compile: these tests check that every model survives, never speed.
ZOO_SETTINGS = dict(rounds=3, warmup=1, min_sample_s=0.0002, final_rounds=3, use_compile=False, progress=False,
                    threads=1, bank=False)


class BatchNormAct2d(torch.nn.BatchNorm2d):
    """BatchNorm followed by an activation in one module whose forward calls F.batch_norm itself,
    as model libraries define it (timm's BatchNormAct2d): torch.fx traces into it, and the split
    graph reads its parameters directly."""

    def __init__(self, channels, act=True):
        super().__init__(channels)
        self.act = torch.nn.SiLU() if act else torch.nn.Identity()

    def forward(self, x):
        x = torch.nn.functional.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                           self.training, self.momentum, self.eps)
        return self.act(x)


class DepthwiseBlock(torch.nn.Module):
    """An inverted-residual block (EfficientNet / MobileNet style) built on BatchNormAct2d."""

    def __init__(self, channels):
        super().__init__()
        self.conv_pw = torch.nn.Conv2d(channels, channels * 2, 1, bias=False)
        self.bn1 = BatchNormAct2d(channels * 2)
        self.conv_dw = torch.nn.Conv2d(channels * 2, channels * 2, 3, padding=1, groups=channels * 2, bias=False)
        self.bn2 = BatchNormAct2d(channels * 2)
        self.conv_pwl = torch.nn.Conv2d(channels * 2, channels, 1, bias=False)
        self.bn3 = BatchNormAct2d(channels, act=False)

    def forward(self, x):
        return x + self.bn3(self.conv_pwl(self.bn2(self.conv_dw(self.bn1(self.conv_pw(x))))))


class BatchNormActNet(torch.nn.Module):
    def __init__(self, channels=8, classes=10):
        super().__init__()
        self.conv_stem = torch.nn.Conv2d(3, channels, 3, stride=2, padding=1, bias=False)
        self.bn1 = BatchNormAct2d(channels)
        self.blocks = torch.nn.Sequential(DepthwiseBlock(channels), DepthwiseBlock(channels))
        self.classifier = torch.nn.Linear(channels, classes)

    def forward(self, x):
        x = self.blocks(self.bn1(self.conv_stem(x)))
        return self.classifier(x.mean((2, 3)))


def _randomise_bn(model):
    """Non-trivial BatchNorm statistics, so that folding them is exercised (fresh ones are 0 / 1)."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return model


def _torchvision(name, size=64, **kw):
    def make():
        tv = pytest.importorskip("torchvision")
        return _randomise_bn(getattr(tv.models, name)(weights=None, **kw)), (torch.randn(1, 3, size, size),)
    return make


def _detection():
    tv = pytest.importorskip("torchvision")
    model = tv.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)
    return _randomise_bn(model), ([torch.rand(3, 96, 96)],)


def _hf(kind):
    def make():
        transformers = pytest.importorskip("transformers")
        torch.manual_seed(0)
        ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(0))
        small = dict(vocab_size=64)
        if kind == "bert":
            cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                          intermediate_size=64, max_position_embeddings=32, **small)
            return transformers.BertModel(cfg), (ids,)
        if kind == "gpt2":
            cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=32, **small)
            return transformers.GPT2Model(cfg), (ids,)
        cfg = transformers.BartConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                      decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                      max_position_embeddings=32, **small)
        return transformers.BartModel(cfg), (ids,)
    return make


ZOO = {
    "batchnorm_act_cnn": lambda: (_randomise_bn(BatchNormActNet()), (torch.randn(1, 3, 32, 32),)),
    "resnet18": _torchvision("resnet18"),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "efficientnet_b0": _torchvision("efficientnet_b0"),
    "regnet_y_400mf": _torchvision("regnet_y_400mf"),
    "convnext_tiny": _torchvision("convnext_tiny", size=32),
    "densenet121": _torchvision("densenet121", size=32),
    "vit_b_16": _torchvision("vit_b_16", size=32, image_size=32),
    "ssdlite320": _detection,
    "bert": _hf("bert"),
    "gpt2": _hf("gpt2"),
    "bart": _hf("bart"),
}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_model_tunes_and_its_artifact_equals_eager(name, tmp_path):
    torch.manual_seed(0)
    model, inputs = ZOO[name]()
    model.eval()
    threads = torch.get_num_threads()
    try:
        _, report = pt.optimize(model, inputs, output=str(tmp_path / "out"), tuning_name=name, **ZOO_SETTINGS)
        loaded = pt.load(str(tmp_path / "out"))
        # Eager at the thread count the artifact runs at (load set it): a detection head's top-k
        # and NMS give other boxes when rounding changes with the count.
        with torch.no_grad():
            want = model(*inputs)
            ok, why = pt.outputs_match(loaded(*inputs), want)
    finally:
        torch.set_num_threads(threads)
    assert ok, "%s: the loaded artifact (%s) differs from eager: %s" % (name, report["plan"]["strategy"], why)
    # Every part that stayed eager for a reason says so: a subgraph record with a note is also in
    # the report's notes.
    for rec in report["subgraphs"]:
        if rec.get("note", "").startswith("not tuned"):
            assert any(rec["submod"] in n for n in report["notes"]), rec
    sys.stderr.write("%s: plan %s, notes %s\n" % (name, report["plan"]["strategy"], report["notes"]))
