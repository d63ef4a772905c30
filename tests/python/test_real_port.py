"""A real port: every operator of the target differs a little from the reference, and one kernel is wrong.

The reference is an fp32 run; the target is the same step
- under bf16 or fp16 autocast (CPU), or
- on "another device": fp32, the floating outputs of every operator that computes multiplied by
  (1 + 1e-7·randn), one ulp (creating, moving, casting and selecting operators are exact anywhere),
and, in the planted cases, one operator's output (forward or backward) gets noise of 1e-2 or 1e-1 of
its RMS (the device's kernel for it is wrong, also when the dumper replays it; a fault the output's
type cannot hold, such as 1e-9 of noise on fp16 gradients below its subnormal spacing, is listed and
not counted). Each target is
dumped with replay against the reference, and compared with replay and without (the same dump with
the replayed outputs left out). A layer-scale model (1e-6, as ConvNeXt, CaiT and DeiT-III use) has
faults in its small gradients.

The rates asserted: with replay the planted operator is named in >= 95 % of the planted cases;
without replay no wrong operator is ever named (precision drift may be reported instead); healthy
bf16/fp16/ulp targets name no culprit, with or without replay; small-gradient faults are found like
any other. The tables are printed (pytest -s) and appended to $PORTKIT_FAULT_REPORT when set.

The always-run part uses hand-written models only. `PORTKIT_REAL_PORT_MODELS=all` adds real
architectures built from packages with random weights (torchvision's ResNet, MobileNetV3, ConvNeXt,
ViT, EfficientNet; transformers' BERT, GPT-2, LLaMA and OPT from small configs); each skips cleanly
when its package is absent. Nothing is downloaded.
"""
import os
import shutil

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from test_planted_faults import (ZOO, Fault, compare, dump, dumper_module, fault_sites,  # noqa: F401
                                 manifest, without_replay)
from portkit.torch import dumper

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# torch 1.x has no fp16 autocast on the CPU (it falls back to fp32 with a warning).
pytestmark = pytest.mark.skipif(not TORCH2, reason="the real-port targets need torch 2.x (CPU fp16 autocast)")


# -- models -------------------------------------------------------------------------------------------

class LayerScaleBlock(torch.nn.Module):
    """A ConvNeXt-style block: depthwise conv, LayerNorm, MLP with GELU, layer scale 1e-6, residual."""

    def __init__(self, c=8):
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.norm = torch.nn.LayerNorm(c)
        self.fc1 = torch.nn.Linear(c, 4 * c)
        self.fc2 = torch.nn.Linear(4 * c, c)
        self.gamma = torch.nn.Parameter(torch.full((c,), 1e-6))
        self.head = torch.nn.Linear(c, 3)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(y))))
        x = x + (self.gamma * y).permute(0, 3, 1, 2)
        return self.head(x.mean(dim=(2, 3)))


def _tv(build):
    def make():
        pytest.importorskip("torchvision")
        return build()
    return make


def _resnet():
    from torchvision.models.resnet import BasicBlock, ResNet
    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10).train()


def _mobilenet():
    from torchvision.models import mobilenet_v3_small
    return mobilenet_v3_small(width_mult=0.25, num_classes=10).train()


def _convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    cfg = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, None, 1)]
    return ConvNeXt(cfg, layer_scale=1e-6, num_classes=10).train()


def _vit():
    from torchvision.models.vision_transformer import VisionTransformer
    vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                            num_classes=10)
    # torchvision zero-initialises the classification head (its training recipe's choice): with it,
    # the logits, the loss's gradient and every backward operator's output are exactly zero, and
    # the backward pass has nothing a fault could be planted in. Random head weights, as the rest.
    vit.heads.head.reset_parameters()
    return vit.train()


def _efficientnet():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10, last_channel=last).train()


class _HF(torch.nn.Module):
    """A transformers model from a small config; the step's loss is its logits' (or hidden states')."""

    def __init__(self, kind):
        super().__init__()
        transformers = pytest.importorskip("transformers")
        small = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32)
        if kind == "bert":
            # With its masked-LM head: the encoder's last hidden states are layer-normed with unit
            # weights, so their mean square is 1 whatever the input and its gradient pure rounding.
            self.m = transformers.BertForMaskedLM(transformers.BertConfig(**small, hidden_dropout_prob=0.0,
                                                                          attention_probs_dropout_prob=0.0))
        elif kind == "gpt2":
            self.m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
                vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                attn_pdrop=0.0))
        elif kind == "opt":
            self.m = transformers.OPTForCausalLM(transformers.OPTConfig(
                vocab_size=64, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
                max_position_embeddings=32, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0))
        else:
            self.m = transformers.LlamaForCausalLM(transformers.LlamaConfig(**small, num_key_value_heads=1))
        self.m.config.use_cache = False
        if hasattr(self.m.config, "_attn_implementation"):
            self.m.config._attn_implementation = "eager"

    def forward(self, ids):
        out = self.m(input_ids=ids)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _images(g):
    return torch.randn(2, 3, 32, 32, generator=g)


def _ids(g):
    return torch.randint(0, 64, (2, 8), generator=g)


ALWAYS = {
    # name: (model factory, input factory)
    "cnn_bn_train": ZOO["cnn_bn_train"],
    "resblock": ZOO["resblock"],
    "transformer": ZOO["transformer"],
    "layer_scale": (lambda: LayerScaleBlock().train(), lambda g: torch.randn(2, 8, 6, 6, generator=g)),
}
REAL = {
    "resnet": (_tv(_resnet), _images),
    "mobilenet_v3": (_tv(_mobilenet), _images),
    "convnext": (_tv(_convnext), _images),
    "vit": (_tv(_vit), _images),
    "bert": (lambda: _HF("bert"), _ids),
    "gpt2": (lambda: _HF("gpt2"), _ids),
    "llama": (lambda: _HF("llama"), _ids),
    "efficientnet": (_tv(_efficientnet), _images),
    "opt": (lambda: _HF("opt"), _ids),
}
# Models whose gradients are small (layer scale 1e-6): their planted faults are also counted apart.
LAYER_SCALE = {"layer_scale", "convnext"}


def models():
    """The always-run models; with PORTKIT_REAL_PORT_MODELS=all also the real architectures, or
    the comma-separated names it lists (of either set)."""
    chosen = os.environ.get("PORTKIT_REAL_PORT_MODELS", "")
    if not chosen:
        return list(ALWAYS)
    if chosen == "all":
        return list(ALWAYS) + list(REAL)
    names = [n.strip() for n in chosen.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALWAYS and n not in REAL]
    if unknown:
        raise ValueError("PORTKIT_REAL_PORT_MODELS names unknown models %s; known: %s"
                         % (", ".join(unknown), ", ".join(list(ALWAYS) + list(REAL))))
    return names


def build(name):
    factory, inputs = ALWAYS.get(name) or REAL[name]
    torch.manual_seed(0)
    model = factory()
    x = inputs(torch.Generator().manual_seed(1))
    torch.manual_seed(2)
    return model, x


def step(model, x, precision):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        y = model(x)
    y.float().pow(2).mean().backward()


# -- the target device ------------------------------------------------------------------------------

# Operators that compute nothing (create constants, move, copy, cast, select elements): their
# results are exact on every device, so the ulp device leaves them alone. Perturbing them would
# change what the model computes rather than how it rounds (a mask built with torch.ones that
# is no longer all ones makes transformers pass an attention mask of -3e31·1e-7 that the reference
# never had).
EXACT_OPS = frozenset("""
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones
    full full_like new_full fill zero scalar_tensor arange lift_fresh lift_fresh_copy copy copy_ _to_copy
    clone contiguous cat stack index index_select gather scatter masked_fill where embedding slice select
    permute transpose t expand view _unsafe_view reshape squeeze unsqueeze split split_with_sizes chunk unbind
    detach alias flip roll repeat tril triu constant_pad_nd relu threshold max min maximum minimum clamp
    max_pool2d_with_indices select_backward slice_backward embedding_dense_backward threshold_backward
    """.split())


class Device(TorchDispatchMode):
    """The target's device under the dumper: with `ulp`, the floating outputs of every operator
    that computes (not those of EXACT_OPS) times (1 + 1e-7·randn) (another vendor's fp32 kernels); with a `site` (op, phase, occurrence), that
    call's first output gets `size` × its RMS of noise, in the live run and in the dumper's replay
    of it (the device's kernel is wrong). The dumper's own bookkeeping operators and the replay's
    baseline (the reference precision's kernel) pass through untouched."""

    def __init__(self, ulp=False, site=None, size=0.0):
        super().__init__()
        self.ulp, self.site, self.size = ulp, site, size
        self.seen = 0
        self.planted_index = None
        self.changed = False
        self.dumper = None
        self.gen = torch.Generator().manual_seed(7)

    def _noise(self, t, scale, gen):
        return (torch.randn(t.shape, generator=gen) * scale).to(t.dtype)

    def _perturb(self, func, out):
        if func.overloadpacket.__name__.rstrip("_") in EXACT_OPS:
            return
        rets = func._schema.returns
        if any(r.alias_info is not None and not r.alias_info.is_write for r in rets):
            return  # a view: its values are its input's
        flat = list(out) if isinstance(out, (tuple, list)) else [out]
        with torch.no_grad():
            for t in flat:
                if isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.numel() and t.layout == torch.strided:
                    # A rounding error never takes a finite result past the largest float (a
                    # mask of -3.4e38 stays finite).
                    noisy = t * (1 + self._noise(t, 1e-7, self.gen))
                    t.copy_(torch.where(torch.isfinite(noisy), noisy, t))

    def _plant(self, out):
        # The first tensor output, as the dump's output.0 (a backward operator's first result is None
        # where its input needs no gradient: convolution_backward of the image's convolution).
        first = next((t for t in out if isinstance(t, torch.Tensor)), None) if isinstance(out, (tuple, list)) else out
        if not isinstance(first, torch.Tensor) or not first.is_floating_point() or first.numel() < 2:
            return False
        vals = first.float()[torch.isfinite(first)]
        rms = float(vals.pow(2).mean().sqrt()) if vals.numel() else 0.0
        if rms == 0.0:
            return False
        with torch.no_grad():
            before = first.float().clone()
            first.add_(self._noise(first.float(), self.size * rms, torch.Generator().manual_seed(1234)).to(first.dtype))
            # The fault is there only when the output's type can hold it: fp16 gradients of 1e-8 lie
            # below its subnormal spacing (6e-8), and noise of 1e-9 added to them rounds away.
            change = (first.float() - before)[torch.isfinite(before)]
            return bool(change.pow(2).mean().sqrt() >= 0.5 * self.size * rms)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        caller = Fault._caller()
        if caller not in ("__torch_dispatch__", "replay"):
            return out
        if self.ulp:
            self._perturb(func, out)
        if self.site is None or str(func.overloadpacket).replace("aten.", "aten::") != self.site[0]:
            return out
        phase = "backward" if dumper_module._in_backward() else "forward"
        if phase != self.site[1]:
            return out
        if caller == "replay":  # replayed just before the live call it belongs to
            if self.seen + 1 == self.site[2]:
                self._plant(out)
            return out
        self.seen += 1
        if self.seen == self.site[2]:
            self.changed = self._plant(out)
            self.planted_index = self.dumper.mode.index  # the dumper records this op next
        return out


def run_target(path, name, precision, device=None, reference=None):
    options = dict(dump_path=str(path))
    if reference is not None:
        options.update(load_file_path=str(reference), use_load=True)
    model, x = build(name)
    d = dumper(**options)
    if device is None:
        with d:
            step(model, x, precision)
    else:
        device.dumper = d
        with device:
            with d:
                step(model, x, precision)
    return path


def sites(ops, ref_names, phase, count):
    """`count` (name, phase, occurrence) of computing operators of the target whose first output
    is floating and that the reference also ran, spread over the phase."""
    picked = [(n, p, k) for n, k in fault_sites_phase(ops, phase) for p in [phase] if n in ref_names]
    if len(picked) <= count:
        return picked
    if count == 1:
        return [picked[len(picked) // 2]]
    stride = (len(picked) - 1) / (count - 1)
    return [picked[round(i * stride)] for i in range(count)]


def fault_sites_phase(ops, phase):
    """fault_sites for either phase: the forward sites of test_planted_faults' rule, applied to
    the operators of `phase`."""
    flipped = [dict(o, phase="forward") if o["phase"] == phase else dict(o, phase="other") for o in ops]
    return fault_sites(flipped, per_model=10 ** 6)


PRECISIONS = ("bf16", "fp16", "ulp")
SIZES = (1e-2, 1e-1)


def _bf16_runs_here(name, precision):
    model, x = build(name)
    try:
        step(model, x, precision if precision != "ulp" else None)
    except RuntimeError as e:
        if "primitive descriptor" in str(e) or "not implemented for" in str(e):
            return False
        raise
    return True


def test_real_port(tmp_path, portkit):
    healthy = {p: {"plain": [0, 0], "replay": [0, 0]} for p in PRECISIONS}  # [false culprits, runs]
    planted = {}  # (precision, phase, size) -> {"replay": [hits, n], "plain": [hits, wrong, n]}
    small = {"replay": [0, 0], "plain": [0, 0, 0]}
    notes, misses = [], []
    per_model = {}  # name -> [healthy false culprits, planted hits with replay, cases, named, wrong without]
    per_site = int(os.environ.get("PORTKIT_REAL_PORT_SITES", "1"))
    for name in models():
        try:
            build(name)
        except pytest.skip.Exception as e:
            notes.append("%s skipped: %s" % (name, e))
            continue
        ref = run_target(tmp_path / name / "ref", name, None)
        ref_ops = manifest(ref)
        ref_names = {o["name"] for o in ref_ops}
        for precision in PRECISIONS:
            autocast = precision if precision != "ulp" else None
            if not _bf16_runs_here(name, autocast):
                notes.append("%s %s: this CPU's torch cannot run it" % (name, precision))
                continue
            base = tmp_path / name / precision
            dev = Device(ulp=precision == "ulp")
            rep = run_target(base / "healthy_rep", name, autocast, dev, reference=ref)
            plain = without_replay(rep, base / "healthy_plain")
            for mode, tgt in (("plain", plain), ("replay", rep)):
                report = compare(portkit, ref, tgt, base / ("healthy_cmp_" + mode))
                got = report["first_divergence"]
                healthy[precision][mode][0] += got is not None
                per_model.setdefault(name, [0, 0, 0, 0, 0])[0] += got is not None
                healthy[precision][mode][1] += 1
                if got is not None:
                    misses.append("healthy %s %s %s: named %s #%d (%s: %s)" % (
                        name, precision, mode, got["name"], got["index"], report["first_divergence_basis"],
                        report["first_divergence_evidence"]))
                assert report["divergence_state"] in ("none", "drift", "culprit")
                assert (report["divergence_state"] == "culprit") == (got is not None)
            tops = manifest(rep)
            shutil.rmtree(str(base))
            for phase in ("forward", "backward"):
                for site in sites(tops, ref_names, phase, per_site):
                    for size in SIZES:
                        tag = "%s_%s_%s_%d_%g" % (precision, phase, site[0].split("::")[-1], site[2], size)
                        dev = Device(ulp=precision == "ulp", site=site, size=size)
                        rep = run_target(base / (tag + "_rep"), name, autocast, dev, reference=ref)
                        if not dev.changed:
                            shutil.rmtree(str(base / (tag + "_rep")))
                            notes.append("%s %s: not planted (the output's type cannot hold the noise, or the "
                                         "operator never ran)" % (name, tag))
                            continue
                        plain = without_replay(rep, base / (tag + "_plain"))
                        cell = planted.setdefault((precision, phase, size), {"replay": [0, 0], "plain": [0, 0, 0]})
                        counted = [cell] + ([small] if name in LAYER_SCALE else [])
                        mine = per_model.setdefault(name, [0, 0, 0, 0, 0])
                        for mode, tgt in (("plain", plain), ("replay", rep)):
                            report = compare(portkit, ref, tgt, base / (tag + "_cmp_" + mode))
                            got = report["first_divergence"]
                            hit = got is not None and got["index"] == dev.planted_index
                            wrong = got is not None and not hit
                            if mode == "replay":
                                mine[1] += hit
                                mine[2] += 1
                            else:
                                mine[3] += hit
                                mine[4] += wrong
                            for c in counted:
                                c[mode][0] += hit
                                if mode == "plain":
                                    c[mode][1] += wrong
                                c[mode][-1] += 1
                            if (mode == "replay" and not hit) or wrong:
                                misses.append("%s %s %s: planted #%d, named %s (%s: %s)" % (
                                    name, tag, mode, dev.planted_index,
                                    got and "%s #%d" % (got["name"], got["index"]),
                                    report["first_divergence_basis"], report["first_divergence_evidence"]))
                        shutil.rmtree(str(base))
        shutil.rmtree(str(tmp_path / name))
    lines = ["real port under torch %s, models: %s" % (torch.__version__, ", ".join(models())),
             "healthy targets (false culprits / runs):"]
    for p in PRECISIONS:
        lines.append("  %-5s without replay %d/%d, with replay %d/%d" % (
            p, healthy[p]["plain"][0], healthy[p]["plain"][1], healthy[p]["replay"][0], healthy[p]["replay"][1]))
    lines.append("planted faults (with replay: planted op named / cases; without replay: named, wrong / cases):")
    tot = {"replay": [0, 0], "plain": [0, 0, 0]}
    for key in sorted(planted):
        c = planted[key]
        for mode in c:
            for i, v in enumerate(c[mode]):
                tot[mode][i] += v
        lines.append("  %-5s %-8s %-5g with replay %d/%d, without replay named %d wrong %d of %d" % (
            key[0], key[1], key[2], c["replay"][0], c["replay"][1], c["plain"][0], c["plain"][1], c["plain"][2]))
    lines.append("  all: with replay %d/%d = %.1f %%; without replay named %d, wrong %d of %d" % (
        tot["replay"][0], tot["replay"][1], 100.0 * tot["replay"][0] / max(tot["replay"][1], 1), tot["plain"][0],
        tot["plain"][1], tot["plain"][2]))
    lines.append("  layer-scale 1e-6 models: with replay %d/%d, without replay named %d wrong %d of %d" % (
        small["replay"][0], small["replay"][1], small["plain"][0], small["plain"][1], small["plain"][2]))
    for name, (false, hits, cases, right, wrong) in per_model.items():
        lines.append("  %-13s healthy false culprits %d; planted named with replay %d/%d, without replay "
                     "named %d wrong %d" % (name, false, hits, cases, right, wrong))
    lines += ["  note: " + n for n in notes]
    lines += ["  miss: " + m for m in misses]
    text = "\n".join(lines)
    print(text)
    if os.environ.get("PORTKIT_FAULT_REPORT"):
        with open(os.environ["PORTKIT_FAULT_REPORT"], "a") as f:
            f.write(text + "\n")
    for p in PRECISIONS:
        for mode in ("plain", "replay"):
            assert healthy[p][mode][0] == 0, text
    assert tot["replay"][1] >= 8 * len(models()) // 2, "too few planted faults\n" + text
    assert tot["replay"][0] >= 0.95 * tot["replay"][1], text
    assert tot["plain"][1] == 0, text
    if any(n in LAYER_SCALE for n in models()):
        assert small["replay"][1] > 0 and small["replay"][0] >= 0.95 * small["replay"][1], text


def test_console_json_and_html_carry_the_same_state(tmp_path, portkit):
    """A bf16 target without replay against fp32, and an identical run: the console, the JSON and
    the HTML say the same of each (culprit, drift with what to do, or no divergence)."""
    import json
    from conftest import run
    ref = run_target(tmp_path / "ref", "transformer", None)
    seen = set()
    for tag, precision in (("bf16", "bf16"), ("same", None)):
        tgt = run_target(tmp_path / tag, "transformer", precision)
        out = tmp_path / ("cmp_" + tag)
        res = run([portkit, "compare", str(ref), str(tgt), "-o", str(out), "--format", "json,html", "-j", "1"])
        assert res.returncode == 0, res.stdout + res.stderr
        report = json.loads((out / "compare_result.json").read_text())
        html = (out / "compare_report.html").read_text()
        console = res.stdout + res.stderr
        state = report["divergence_state"]
        seen.add(state)
        assert 'data-state="%s"' % state in html
        if state == "drift":
            assert report["drift_start"] is not None and report["first_divergence"] is None
            assert "Precision drift starts at " + report["drift_start"]["name"] in console
            assert "run with replay to localise" in console and "What to do" in html
        elif state == "none":
            assert "No divergence" in html and report["drift_start"] is None
        else:
            assert "First divergence: " in console and "Culprit: " in html
        if precision is None:
            assert state == "none"
        else:
            assert state != "culprit", report["first_divergence_evidence"]
    assert seen <= {"none", "drift"}
