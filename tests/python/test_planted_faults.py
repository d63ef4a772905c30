"""Planted faults on a zoo of small models: does `portkit compare` name the operator that went wrong?

The zoo (written here, run on torch 1.13 and torch 2.x): a CNN with BatchNorm in train and in eval
mode, a ResNet-style block (in-place ReLU, residual add), a transformer block (causal mask, dropout),
an LSTM followed by a GRU, an embedding model with integer inputs and an argmax, views / strided /
in-place / out= operators, empty tensors, complex tensors, fp16 and bf16 (and fp8 on torch 2.x).

1. Every model is dumped twice (fp32, forward and backward) and compared: no error, no culprit for
   identical runs, also replayed and in bf16 autocast; tensors of dtypes that cannot be stored are
   reported (N/A with their note), never dropped.
2. A faulty "device" (a TorchDispatchMode under the dumper) changes the output of one forward
   operator: relative noise of 1e-3, 1e-2 and 1e-1 of its RMS, a bias shift, a cast through bf16, or
   a swapped operator (gelu for relu, sub for add, softmax along the wrong axis, ...); the fault
   also applies when the dumper replays that operator (it is the device's kernel that is wrong).
   The first culprit that compare names must be the planted operator, with replay and without, in
   at least 95 % of the cases; the hit rate per fault kind is printed (pytest -s) and written to
   $PORTKIT_FAULT_REPORT when that is set.
"""
import json
import os
import shutil
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit.torch import dumper  # noqa: E402
import importlib  # noqa: E402
dumper_module = importlib.import_module("portkit.torch.dumper")

DUMPER_FILE = os.path.join("portkit", "torch", "dumper.py")
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


# -- the zoo -----------------------------------------------------------------------------------------

class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1))


class ResBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y += x  # in-place residual add
        return self.relu(y).mean(dim=(2, 3))


class Transformer(torch.nn.Module):
    """Pre-norm block: causal self-attention with dropout, then a GELU MLP."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.drop = torch.nn.Dropout(0.1)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 2 * d)
        self.fc2 = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        split = lambda z: z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        scores = scores + torch.full((t, t), float("-inf")).triu(1)  # the causal mask
        att = self.drop(torch.softmax(scores, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, batch_first=True)
        self.gru = torch.nn.GRU(8, 6, batch_first=True)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.fc(y[:, -1])


class Embedder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 12)
        self.fc = torch.nn.Linear(12, 5)

    def forward(self, ids):
        h = torch.tanh(self.emb(ids)).mean(dim=1)
        logits = self.fc(h)
        return logits + logits.argmax(dim=-1, keepdim=True).float() * 0  # an integer output on the way


class Strided(torch.nn.Module):
    """Views, slices, transposes, in-place and out= operators."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8) * 0.3)

    def forward(self, x):
        y = (x @ self.w).t()                 # a transposed (non-contiguous) result
        z = y.reshape(4, 16)[:, ::2]         # reshape of a transpose, then a strided slice
        buf = torch.empty(4, 8)
        with torch.no_grad():                # out= does not take part in autograd
            torch.mul(z, 2.0, out=buf)       # out=: the buffer's previous contents are not data
        s = torch.sigmoid(buf + z) * 1.0
        s.mul_(1.5)                          # in-place
        return s.sum(dim=0) + y.narrow(0, 2, 2).sum()


class Empties(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(5, 5)

    def forward(self, x):
        nothing = x[:0]                                # an empty view
        joined = torch.cat([nothing, x], dim=0)         # cat with an empty tensor
        extra = self.fc(nothing).sum()                  # a linear layer on zero rows
        return torch.tanh(self.fc(joined)) + extra


class Complexish(torch.nn.Module):
    """rfft: complex intermediates (not storable in safetensors: reported, not dropped)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(9, 4)

    def forward(self, x):
        spec = torch.fft.rfft(x, dim=-1)
        return self.fc(torch.sigmoid(spec.abs()))


class HalfPrecision(torch.nn.Module):
    """fp16 and bf16 tensors in an fp32 model (and fp8 on torch 2.x)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        b = h.to(torch.bfloat16)
        g = (torch.tanh(b) * 2).float()
        f = h.to(torch.float16)
        f = (f * f).float()
        if TORCH2:
            f = f + h.to(torch.float8_e4m3fn).float()
        return torch.relu(g + f)


def _cnn(train):
    def make():
        m = CNN()
        return m.train(train)
    return make


ZOO = {
    # name: (model factory, input factory, supports bf16 autocast)
    "cnn_bn_train": (_cnn(True), lambda g: torch.randn(2, 3, 8, 8, generator=g)),
    "cnn_bn_eval": (_cnn(False), lambda g: torch.randn(2, 3, 8, 8, generator=g)),
    "resblock": (lambda: ResBlock().train(), lambda g: torch.randn(2, 4, 6, 6, generator=g)),
    "transformer": (lambda: Transformer().train(), lambda g: torch.randn(2, 5, 16, generator=g)),
    "lstm_gru": (Recurrent, lambda g: torch.randn(2, 2, 6, generator=g)),
    "embedding": (Embedder, lambda g: torch.randint(0, 50, (3, 7), generator=g)),
    "strided": (Strided, lambda g: torch.randn(8, 8, generator=g)),
    "empty": (Empties, lambda g: torch.randn(3, 5, generator=g)),
    "complex": (Complexish, lambda g: torch.randn(3, 16, generator=g)),
    "half": (HalfPrecision, lambda g: torch.randn(4, 8, generator=g)),
}


def build(name):
    """A zoo model and its input, the same every time (same weights, and the same dropout masks
    once torch's seed is set again)."""
    factory, inputs = ZOO[name]
    torch.manual_seed(0)
    model = factory()
    x = inputs(torch.Generator().manual_seed(1))
    torch.manual_seed(2)
    return model, x


def step(model, x, backward=True, autocast=False):
    """One training step: forward (bf16 autocast on request) and, unless told not to, backward."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y = model(x)
    if backward:
        y.float().pow(2).mean().backward()
    return y


def dump(path, name, fault=None, reference=None, **kw):
    """Dumps one step of zoo model `name` into `path` (built outside the dump: only the step is
    recorded), optionally replayed against `reference` and with a planted `fault`."""
    options = dict(dump_path=str(path))
    if reference is not None:
        options.update(load_file_path=str(reference), use_load=True)
    model, x = build(name)
    d = dumper(**options)
    if fault is not None:
        fault.dumper = d
        with fault:
            with d:
                step(model, x, **kw)
    else:
        with d:
            step(model, x, **kw)
    return path


def compare(portkit, ref, tgt, out):
    res = run([portkit, "compare", str(ref), str(tgt), "-o", str(out), "--format", "json", "-j", "1"])
    assert res.returncode == 0, res.stdout + res.stderr
    with open(os.path.join(str(out), "compare_result.json")) as f:
        return json.load(f)


def manifest(path):
    with open(os.path.join(str(path), "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


# -- 1. every model dumps and compares; identical runs name no culprit --------------------------------

@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_identical_runs_name_no_culprit(tmp_path, portkit, name):
    ref = dump(tmp_path / "ref", name)
    tgt = dump(tmp_path / "tgt", name)
    rep = dump(tmp_path / "rep", name, reference=ref)
    ops = manifest(ref)
    assert any(o["phase"] == "backward" for o in ops), "the step has a backward pass"
    for target in (tgt, rep):
        report = compare(portkit, ref, target, tmp_path / ("cmp_" + target.name))
        assert report["first_divergence"] is None, (name, target.name, report["first_divergence"],
                                                    report["first_divergence_evidence"])
        assert report["first_mismatching_output"] is None
        assert not report["unmatched_target_ops"] and not report["unmatched_reference_ops"]
        assert report["verdicts"].get("No", 0) == 0
        assert not [r for r in report["rows"] if "could not" in r.get("err_message", "")]
    if target is rep:
        assert report["replayed_operators"]["ok"] > 0
    # Dtypes that cannot be stored are listed with a note and reported as not compared.
    noted = [t for o in ops for t in o["tensors"] if t.get("note")]
    if name == "complex":
        assert noted and all("complex" in t["dtype"] for t in noted)
        na = [r for r in report["rows"] if r["verdict"] == "N/A"]
        assert na and all("not compared" in r["err_message"] for r in na)
    if name == "half":
        dtypes = {t["dtype"] for o in ops for t in o["tensors"]}
        assert {"BF16", "F16"} <= dtypes and (not TORCH2 or "F8_E4M3" in dtypes)
    if name in ("embedding",):
        assert any(t["dtype"] == "I64" for o in ops for t in o["tensors"])
    if name == "empty":
        assert any(t["numel"] == 0 for o in ops for t in o["tensors"])


def _bf16_step_runs_here(name):
    """Whether this CPU's torch runs a bf16-autocast step of zoo model `name` at all (oneDNN's
    bf16 LSTM needs instructions some CPUs lack: "could not create a primitive descriptor")."""
    model, x = build(name)
    try:
        step(model, x, autocast=True)
    except RuntimeError as e:
        if "primitive descriptor" in str(e):
            return False
        raise
    return True


@pytest.mark.parametrize("name", ["cnn_bn_train", "transformer", "lstm_gru"])
def test_zoo_identical_bf16_runs_name_no_culprit(tmp_path, portkit, name):
    if not _bf16_step_runs_here(name):
        pytest.skip("this CPU's torch cannot run %s under bf16 autocast (oneDNN has no kernel for it here)" % name)
    ref = dump(tmp_path / "ref", name, autocast=True)
    tgt = dump(tmp_path / "tgt", name, autocast=True)
    rep = dump(tmp_path / "rep", name, reference=ref, autocast=True)
    assert any(t["dtype"] == "BF16" for o in manifest(ref) for t in o["tensors"])
    for target in (tgt, rep):
        report = compare(portkit, ref, target, tmp_path / ("cmp_" + target.name))
        assert report["first_divergence"] is None, (name, target.name, report["first_divergence"],
                                                    report["first_divergence_evidence"])
        assert report["verdicts"].get("No", 0) == 0


# -- 2. planted faults ---------------------------------------------------------------------------------

def _swap(base, func, args, kwargs, out):
    """The output of another operator in place of `func` (None: no swap defined for it)."""
    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if base == "embedding" and x is not None:  # an off-by-one row lookup
        return func(x.roll(1, 0), *args[1:], **kwargs)
    if x is None or not x.is_floating_point():
        return None
    f = torch.nn.functional
    if base == "convolution" and len(args) > 1:  # convolution instead of cross-correlation: flipped kernel
        return func(x, args[1].flip(-1, -2), *args[2:], **kwargs)
    if base in ("mm", "bmm") and len(args) > 1:  # the other operand's rows in the wrong order
        return func(x, args[1].flip(-2), **kwargs)
    if base == "native_batch_norm" and len(args) > 5 and not args[5]:  # eval: the affine part left out
        return func(x, None, None, *args[3:], **kwargs)[0]
    if base == "native_layer_norm" and len(args) > 4:
        return func(x, args[1], None, None, *args[4:], **kwargs)[0]
    if base == "mean" and len(args) > 1:  # a sum where a mean belongs
        return torch.sum(x, dim=args[1], keepdim=bool(args[2]) if len(args) > 2 else False).to(out.dtype)
    if base in ("relu", "relu_", "threshold"):
        return f.gelu(x)
    if base == "gelu":
        return torch.relu(x)
    if base in ("tanh", "tanh_"):
        return torch.sigmoid(x)
    if base in ("sigmoid", "sigmoid_"):
        return torch.tanh(x)
    if base in ("_softmax", "softmax") and x.dim() > 1:
        dim = args[1] if len(args) > 1 else -1
        return torch.softmax(x.masked_fill(torch.isinf(x), -1e4), dim=dim - 1 if dim != 0 else 1).to(out.dtype)
    if base in ("add", "add_") and len(args) > 1 and isinstance(args[1], torch.Tensor):
        return (x - args[1]).to(out.dtype).expand_as(out)
    if base in ("mul", "mul_") and len(args) > 1 and isinstance(args[1], (torch.Tensor, int, float)):
        return (x + args[1]).to(out.dtype).expand_as(out)
    if base == "addmm" and len(args) > 2:
        return (args[1] @ args[2]).to(out.dtype)  # the bias left out
    return None


FAULTS = ("noise_1e-3", "noise_1e-2", "noise_1e-1", "bias_shift", "bf16_cast", "swapped_op")


class Fault(TorchDispatchMode):
    """A device whose kernel for the `occurrence`-th forward call of `op` is wrong. It sits under
    the dumper, so the dumper records the wrong output; the dumper's own bookkeeping operators
    (statistics, copies) pass through untouched. The dumper's replay of that operator gets the same
    wrong kernel."""

    def __init__(self, op, occurrence, kind):
        super().__init__()
        self.op, self.occurrence, self.kind = op, occurrence, kind
        self.seen = 0
        self.planted_index = None  # the target dump's index of the planted operator
        self.changed = False
        self.dumper = None

    @staticmethod
    def _caller():
        """The dumper function that called this operator ('__torch_dispatch__': the live run,
        'replay', or a bookkeeping helper), or None when the dumper did not."""
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename.endswith(DUMPER_FILE):
                return f.f_code.co_name
            f = f.f_back
        return None

    def _apply(self, func, args, kwargs, out):
        if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
            first = self._apply(func, args, kwargs, out[0])  # the first output (layer/batch norm's)
            return out if first is out[0] else type(out)([first] + list(out[1:]))
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
            return out
        base = func.overloadpacket.__name__
        finite = torch.isfinite(out)
        vals = out.float()[finite]
        scale = float(vals.pow(2).mean().sqrt()) if vals.numel() else 0.0
        if scale == 0.0:
            return out
        g = torch.Generator().manual_seed(1234)  # the same wrong numbers in the live run and the replay
        noise = torch.randn(out.shape, generator=g)
        kind = self.kind
        if kind.startswith("noise_"):
            new = out.float() + float(kind.split("_")[1]) * scale * noise
        elif kind == "bias_shift":
            new = out.float() + 0.05 * scale
        elif kind == "bf16_cast":
            new = out.to(torch.bfloat16).float()
        else:
            new = _swap(base, func, args, kwargs, out)
            if new is None:
                return out
        new = new.to(out.dtype)
        if out.is_contiguous() or base.endswith("_"):
            out.copy_(new)  # in-place ops return their argument: change it where it is
            return out
        return new

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if str(func.overloadpacket).replace("aten.", "aten::") != self.op:
            return out
        caller = self._caller()
        if caller not in ("__torch_dispatch__", "replay") or dumper_module._in_backward():
            return out
        if caller == "replay":  # replayed just before the live call it belongs to
            return self._apply(func, args, kwargs, out) if self.seen + 1 == self.occurrence else out
        self.seen += 1
        if self.seen != self.occurrence:
            return out
        first = lambda o: o[0] if isinstance(o, (tuple, list)) else o  # noqa: E731
        before = first(out).detach().clone() if isinstance(first(out), torch.Tensor) else None
        out = self._apply(func, args, kwargs, out)
        self.changed = before is not None and not torch.equal(before, first(out).detach())
        self.planted_index = self.dumper.mode.index  # the dumper records this op next
        return out


def fault_sites(ops, per_model=3):
    """Forward operators whose first output is a floating tensor that computing ops produce:
    (name, occurrence among the forward calls of that name), spread over the run."""
    counts, candidates = {}, []
    for o in ops:
        if o["phase"] != "forward" or o["kind"] != "op":
            continue
        counts[o["name"]] = counts.get(o["name"], 0) + 1
        base = o["name"].split("::")[-1]
        out0 = next((t for t in o["tensors"] if t["key"] == "output.0"), None)
        if (o.get("view") or out0 is None or out0["dtype"] not in ("F32", "BF16", "F16") or out0["numel"] < 2
                or base.startswith(("empty", "new_empty", "bernoulli", "rand", "uniform", "normal", "full",
                                    "zeros", "ones", "scalar_tensor", "lift", "clone", "copy", "_to_copy",
                                    "to", "contiguous", "fill", "masked_fill", "triu", "detach", "expand",
                                    "index", "select", "slice", "split", "chunk", "unbind", "cat", "stack",
                                    "max_pool", "_fft", "view_as_real", "abs"))):
            continue
        if out0["max"] is None or out0["max"] == out0["min"]:
            continue
        candidates.append((o["name"], counts[o["name"]]))
    if len(candidates) <= per_model:
        return candidates
    step_ = (len(candidates) - 1) / (per_model - 1)
    return [candidates[round(i * step_)] for i in range(per_model)]


FAULT_MODELS = ["cnn_bn_train", "cnn_bn_eval", "resblock", "transformer", "lstm_gru", "embedding",
                "strided", "half"]


def without_replay(src, dst):
    """The dump `src` as a plain run would have written it: the replayed outputs and the replay notes
    left out of the manifest, the tensor files linked. (The live tensors of a replayed run are
    bit-identical to a plain run's: test_replay_leaves_the_live_run_bit_identical.)"""
    os.makedirs(str(dst))
    with open(os.path.join(str(src), "manifest.jsonl")) as f, open(os.path.join(str(dst), "manifest.jsonl"), "w") as g:
        for line in f:
            entry = json.loads(line)
            entry.pop("replay", None)
            entry["tensors"] = [t for t in entry["tensors"] if not t["key"].startswith("replay.")]
            g.write(json.dumps(entry) + "\n")
    for name in os.listdir(str(src)):
        if name != "manifest.jsonl":
            os.link(os.path.join(str(src), name), os.path.join(str(dst), name))
    return dst


def test_planted_faults_are_named(tmp_path, portkit):
    results = {k: {"plain": [0, 0], "replay": [0, 0]} for k in FAULTS}
    misses, no_effect = [], []
    for name in FAULT_MODELS:
        ref = dump(tmp_path / name / "ref", name, backward=False)
        for op, occurrence in fault_sites(manifest(ref)):
            for kind in FAULTS:
                tag = "%s_%s_%d_%s" % (name, op.split("::")[-1], occurrence, kind)
                fault = Fault(op, occurrence, kind)
                replayed = dump(tmp_path / name / (tag + "_replay"), name, fault=fault, backward=False, reference=ref)
                if not fault.changed:
                    if kind != "swapped_op":  # a swap is only defined for some operators
                        no_effect.append(tag)
                    shutil.rmtree(str(replayed))
                    continue
                plain = without_replay(replayed, tmp_path / name / (tag + "_plain"))
                for mode, tgt in (("plain", plain), ("replay", replayed)):
                    report = compare(portkit, ref, tgt, tmp_path / name / (tag + "_" + mode + "_cmp"))
                    got = report["first_divergence"]
                    hit = got is not None and got["index"] == fault.planted_index
                    results[kind][mode][0] += hit
                    results[kind][mode][1] += 1
                    if not hit:
                        misses.append("%s %s: planted #%d, named %s (%s: %s)" % (
                            tag, mode, fault.planted_index, got and "%s #%d" % (got["name"], got["index"]),
                            report["first_divergence_basis"], report["first_divergence_evidence"]))
                    shutil.rmtree(str(tmp_path / name / (tag + "_" + mode + "_cmp")))
                shutil.rmtree(str(plain))
                shutil.rmtree(str(replayed))
    lines = ["planted faults under torch %s: first culprit named == planted operator" % torch.__version__]
    total = {"plain": [0, 0], "replay": [0, 0]}
    for kind in FAULTS:
        cells = []
        for mode in ("plain", "replay"):
            h, n = results[kind][mode]
            total[mode][0] += h
            total[mode][1] += n
            cells.append("%s %d/%d" % ("without replay" if mode == "plain" else "with replay", h, n))
        lines.append("  %-11s %s" % (kind, ", ".join(cells)))
    for mode in ("plain", "replay"):
        h, n = total[mode]
        lines.append("  all %s: %d/%d = %.1f %%" % ("without replay" if mode == "plain" else "with replay", h, n,
                                                   100.0 * h / max(n, 1)))
    lines += ["  miss: " + m for m in misses]
    if no_effect:
        lines.append("  faults that changed nothing (left out): " + ", ".join(no_effect))
    text = "\n".join(lines)
    print(text)
    if os.environ.get("PORTKIT_FAULT_REPORT"):
        with open(os.environ["PORTKIT_FAULT_REPORT"], "a") as f:
            f.write(text + "\n")
    for mode in ("plain", "replay"):
        h, n = total[mode]
        assert n >= 100, "too few planted faults: %d" % n
        assert h >= 0.95 * n, text
