"""portkit.torch.dumper on the models people port: BatchNorm CNNs, views, dropout with replay, causal
attention masks and real overflows, uninitialised buffers, and the backward phase however
torch.autograd.grad was imported. Every test runs under torch 1.13 and torch 2.x."""
import json
import os
import sys
import zlib

import pytest
import torch
# Imported by name before any dumper starts: the phase must still say backward inside it.
from torch.autograd import backward as autograd_backward
from torch.autograd import grad as autograd_grad

from conftest import HERE, run
from test_accuracy import compare_json, manifest

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit import safetensors_io  # noqa: E402
from portkit.torch import dumper  # noqa: E402


# -- a ResNet-style CNN with BatchNorm -------------------------------------------------------------

class BasicBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y += x  # in-place residual add
        return self.relu(y)


class SmallResNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                        torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2))
        self.block = BasicBlock(8)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.block(self.stem(x))), 1))


def resnet_step(train, **options):
    torch.manual_seed(0)
    net = SmallResNet().train(train)
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with dumper(**options):
        loss = torch.nn.functional.cross_entropy(net(x), torch.tensor([1, 7]))
        loss.backward()
    return loss.detach()


MODES = {"all": {}, "stats_only": {"stats_only": True}, "check_overflow": {"check_overflow": True},
         "input": {"dump_mode": "input"}, "output": {"dump_mode": "output"}, "mix": {"level": "mix"}}


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_batchnorm_resnet_dumps_in_train_and_eval_in_every_mode(tmp_path, portkit, train, mode):
    for name in ("a", "b"):
        resnet_step(train, dump_path=str(tmp_path / name), **MODES[mode])
    ops = manifest(tmp_path / "a")
    names = {o["name"] for o in ops}
    assert any("batch_norm" in n for n in names), names
    assert {o["phase"] for o in ops} == {"forward", "backward"}
    empty = [t for o in ops for t in o["tensors"] if t.get("numel") == 0]
    for o in ops:
        for t in o["tensors"]:
            if t.get("numel") == 0:  # BatchNorm's empty save_mean/save_invstd (eval), empty buffers
                assert t["max"] is None and t["min"] is None and t["mean"] is None and t["norm"] is None
                assert t["nan"] == 0 and t["inf"] == 0
            elif "note" not in t:
                assert t["numel"] > 0 and t["max"] is not None
    if not train and mode in ("all", "stats_only", "check_overflow", "output"):
        assert empty, "eval-mode batch norm returns empty tensors; they are recorded"
    assert not any(o["overflow"] for o in ops)
    # Two identical runs compare without a divergence; nothing overflows.
    report = compare_json(portkit, tmp_path / "a", tmp_path / "b", tmp_path / "cmp")
    assert report["first_divergence"] is None and report["first_mismatching_output"] is None
    assert report["verdicts"].get("No", 0) == 0
    res = run([portkit, "overflow", str(tmp_path / "a")])
    assert res.returncode == 0 and "No overflowing operator" in res.stderr, res.stdout + res.stderr


def test_batchnorm_fp32_vs_bf16_compares_end_to_end(tmp_path, portkit):
    torch.manual_seed(0)
    net = SmallResNet()
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with dumper(dump_path=str(tmp_path / "ref")):
        net(x).sum().backward()
    torch.manual_seed(0)
    net = SmallResNet()
    with dumper(dump_path=str(tmp_path / "tgt")):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = net(x)
        y.float().sum().backward()
    report = compare_json(portkit, tmp_path / "ref", tmp_path / "tgt", tmp_path / "cmp")
    assert report["verdicts"].get("Yes", 0) > 20


# -- inputs the kernel changes -----------------------------------------------------------------------

def _batch_norm_record(ops):
    found = [o for o in ops if o["name"] == "aten::native_batch_norm"]
    assert len(found) == 1, [o["name"] for o in ops]
    return found[0], {t["key"]: t for t in found[0]["tensors"]}


@pytest.mark.parametrize("mode", ["all", "stats_only", "check_overflow", "mix", "checksum"])
def test_batchnorm_training_records_the_running_stats_it_was_given(tmp_path, mode):
    """native_batch_norm's schema does not mark running_mean/var as written, yet training updates
    them in place: the dump holds the values the kernel read (inputs 3 and 4), not the updated ones."""
    options = dict(MODES.get(mode, {}))
    if mode == "checksum":
        options = {"stats_only": True, "checksum": True}
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(4).train()
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0, 0.25]))
        bn.running_var.copy_(torch.tensor([2.0, 0.5, 1.5, 3.0]))
    given_mean, given_var = bn.running_mean.clone(), bn.running_var.clone()
    x = torch.randn(3, 4, 5, 5) * 3 + 1
    with dumper(dump_path=str(tmp_path / "d"), **options):
        bn(x)
    assert not torch.equal(bn.running_mean, given_mean)  # the kernel did update them
    op, tensors = _batch_norm_record(manifest(tmp_path / "d"))
    for key, given in (("input.3", given_mean), ("input.4", given_var)):
        t = tensors[key]
        assert t["max"] == pytest.approx(float(given.max()), rel=1e-6), key
        assert t["min"] == pytest.approx(float(given.min()), rel=1e-6), key
        assert t["mean"] == pytest.approx(float(given.mean()), rel=1e-6), key
        if mode == "checksum":
            assert t["crc32"] == zlib.crc32(given.numpy().tobytes())
    if op["file"]:
        data = safetensors_io.read_torch(str(tmp_path / "d" / op["file"]))
        assert torch.equal(data["input.3"], given_mean) and torch.equal(data["input.4"], given_var)
        assert torch.equal(data["input.0"], x)


def test_check_overflow_keeps_the_running_stats_given_to_an_overflowing_batch_norm(tmp_path):
    """With check_overflow the data is kept only once the operator overflowed: the running statistics
    it was given are taken from a copy made before the call."""
    bn = torch.nn.BatchNorm1d(2).train()
    given_mean, given_var = bn.running_mean.clone(), bn.running_var.clone()
    x = torch.tensor([[3e38, 1.0], [3e38, 2.0], [-3e38, 1.0]])  # its variance overflows float32
    with dumper(dump_path=str(tmp_path / "d"), check_overflow=True):
        bn(x)
    op, tensors = _batch_norm_record(manifest(tmp_path / "d"))
    assert op["overflow"] and op["file"]
    data = safetensors_io.read_torch(str(tmp_path / "d" / op["file"]))
    assert torch.equal(data["input.3"], given_mean) and torch.equal(data["input.4"], given_var)
    assert not torch.equal(bn.running_var, given_var)


_SNEAKY = None


def test_an_input_changed_against_its_schema_is_recorded_as_given(tmp_path):
    """A kernel the dumper knows nothing about writes to an input its schema declares read-only: the
    recorded input is still the value it was given, in tensor and in statistics mode."""
    global _SNEAKY
    if _SNEAKY is None:  # registered once per process: a library namespace cannot be defined twice
        _SNEAKY = torch.library.Library("portkit_test_sneaky", "DEF")
        _SNEAKY.define("bump(Tensor x, Tensor state) -> Tensor")

        def bump(x, state):
            state.add_(1)
            return x + state
        _SNEAKY.impl("bump", bump, "CPU")
    for options in ({}, {"stats_only": True}):
        path = tmp_path / ("stats" if options else "tensor")
        state = torch.zeros(3)
        with dumper(dump_path=str(path), **options):
            torch.ops.portkit_test_sneaky.bump(torch.ones(3), state)
        assert torch.equal(state, torch.ones(3))
        (rec,) = [o for o in manifest(path) if "bump" in o["name"]]
        tensors = {t["key"]: t for t in rec["tensors"]}
        assert tensors["input.1"]["max"] == 0.0 and tensors["output.0"]["max"] == 2.0
        if rec["file"]:
            assert torch.equal(safetensors_io.read_torch(str(path / rec["file"]))["input.1"], torch.zeros(3))


def test_in_place_module_inputs_are_recorded_before_the_module_runs(tmp_path):
    """ReLU(inplace=True) as a module (level=module) changes its own input: the module's input is
    what it was given."""
    x = torch.tensor([-1.0, 2.0, -3.0])
    given = x.clone()
    with dumper(dump_path=str(tmp_path / "d"), level="module"):
        torch.nn.ReLU(inplace=True)(x)
    (rec,) = manifest(tmp_path / "d")
    data = safetensors_io.read_torch(str(tmp_path / "d" / rec["file"]))
    assert torch.equal(data["input.0"], given) and torch.equal(data["output.0"], torch.relu(given))


# -- views and replay --------------------------------------------------------------------------------

def transposed_reshape(x):
    y = (x * 2).t()
    return y.reshape(3, 2, 2), y.reshape(-1, 2).sum(0), y.sin()


def test_replayed_views_are_not_a_divergence_between_identical_runs(tmp_path, portkit):
    x = torch.arange(12.0).reshape(4, 3)
    with dumper(dump_path=str(tmp_path / "ref")):
        transposed_reshape(x)
    with dumper(dump_path=str(tmp_path / "rep"), load_file_path=str(tmp_path / "ref"), use_load=True):
        transposed_reshape(x)
    ops = manifest(tmp_path / "rep")
    for o in ops:
        if o.get("view"):
            assert o["replay"]["status"] == "skipped" and "view operator" in o["replay"]["reason"]
        else:
            assert o["replay"]["status"] == "ok", o
    # The ops that read the transposed (non-contiguous) tensor replay on its live layout and give
    # exactly the live result.
    sin = next(o for o in ops if o["name"] == "aten::sin")
    layout = next(t for t in sin["tensors"] if t["key"] == "input.0")
    assert layout["stride"] == [1, 3] and layout["storage_offset"] == 0
    for o in ops:
        if o["replay"]["status"] == "ok":
            data = safetensors_io.read(str(tmp_path / "rep" / o["file"]))
            assert (data["output.0"] == data["replay.output.0"]).all(), o["name"]
    res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "rep"), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr
    assert "No diverging operator output." in res.stderr and "First divergence" not in res.stderr
    with open(tmp_path / "cmp" / "compare_result.json") as f:
        report = json.load(f)
    assert report["first_divergence"] is None and report["verdicts"].get("No", 0) == 0
    assert report["replayed_operators"]["ok"] >= 3


def test_replay_rebuilds_the_live_strides_and_storage_offset(tmp_path):
    def f():
        x = torch.arange(24.0) * 2
        v = x[4:].view(4, 5)[:, 1:4]  # offset 5, strides (5, 1): not contiguous
        return torch.ops.aten.as_strided_copy(v, (2, 3), (5, 1), 5)  # reads v's storage directly

    with dumper(dump_path=str(tmp_path / "ref")):
        live = f()
    with dumper(dump_path=str(tmp_path / "rep"), load_file_path=str(tmp_path / "ref"), use_load=True):
        f()
    op = next(o for o in manifest(tmp_path / "rep") if o["name"] == "aten::as_strided_copy")
    assert op["replay"]["status"] == "ok"
    given = next(t for t in op["tensors"] if t["key"] == "input.0")
    assert given["stride"] == [5, 1] and given["storage_offset"] == 5
    data = safetensors_io.read(str(tmp_path / "rep" / op["file"]))
    assert data["replay.output.0"].tolist() == live.tolist() == [[10.0, 12.0, 14.0], [20.0, 22.0, 24.0]]


class DropoutNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 30)
        self.drop = torch.nn.Dropout(0.3)
        self.fc2 = torch.nn.Linear(30, 5)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def dropout_step():
    torch.manual_seed(0)
    net = DropoutNet().train()
    x = torch.randn(16, 20)
    g = torch.Generator().manual_seed(5)
    noise = torch.randn(16, 5, generator=g)  # a generator passed to the op: restored too
    y = torch.nn.functional.dropout(net(x) + noise, 0.5)
    y.sum().backward()
    return y.detach(), net.fc1.weight.grad.clone(), torch.rand(3)


def test_replay_leaves_the_live_run_bit_identical(tmp_path, portkit):
    plain = dropout_step()
    with dumper(dump_path=str(tmp_path / "ref")):
        dumped = dropout_step()
    with dumper(dump_path=str(tmp_path / "rep"), load_file_path=str(tmp_path / "ref"), use_load=True):
        replayed = dropout_step()
    for a, b, c in zip(plain, dumped, replayed):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert int((replayed[0] != 0).sum()) == int((plain[0] != 0).sum())
    ops = manifest(tmp_path / "rep")
    random_ops = [o for o in ops if o["name"] in ("aten::bernoulli_", "aten::native_dropout", "aten::randn")]
    assert random_ops
    for o in random_ops:  # replayed with the live run's random numbers
        assert o["replay"]["status"] == "ok", o["replay"]
        data = safetensors_io.read(str(tmp_path / "rep" / o["file"]))
        assert (data["output.0"] == data["replay.output.0"]).all(), o["name"]
    report = compare_json(portkit, tmp_path / "ref", tmp_path / "rep", tmp_path / "cmp")
    assert report["first_divergence"] is None and report["verdicts"].get("No", 0) == 0


# -- uninitialised memory -------------------------------------------------------------------------------

def buffers_step():
    torch.manual_seed(0)
    garbage = torch.full((64,), float("nan"))  # freed: the empty tensors below may reuse its memory
    del garbage
    a = torch.randn(64)
    buf = torch.empty(64)
    torch.mul(a, 3, out=buf)
    fresh = torch.empty_like(a).uniform_()
    staged = a.new_empty((8, 8))
    staged.copy_(a.view(8, 8))
    return buf + fresh + staged.view(-1)


def test_uninitialised_buffers_are_not_data(tmp_path, portkit):
    for name in ("a", "b"):
        with dumper(dump_path=str(tmp_path / name)):
            buffers_step()
    ops = manifest(tmp_path / "a")
    empties = [o for o in ops if o["name"] in ("aten::empty", "aten::empty_like", "aten::new_empty")]
    assert len(empties) >= 3
    for o in empties:
        assert o["tensors"] == [] and o["file"] is None and not o["overflow"]
        assert [u["key"] for u in o["uninitialised"]] == ["output.0"]
    # The previous contents of an out= buffer, and of a fresh buffer an in-place op writes into,
    # are not inputs.
    for name in ("aten::mul", "aten::uniform_", "aten::copy_"):
        o = next(o for o in ops if o["name"] == name)
        assert "input.0" not in [t["key"] for t in o["tensors"]] or name == "aten::mul"
        assert any(u["key"].startswith("input.") for u in o["uninitialised"]), o
        assert not o["overflow"]
    mul = next(o for o in ops if o["name"] == "aten::mul")
    assert "input.0" in [t["key"] for t in mul["tensors"]]  # `a` is a real input
    report = compare_json(portkit, tmp_path / "a", tmp_path / "b", tmp_path / "cmp")
    assert report["first_divergence"] is None and report["first_mismatching_output"] is None
    assert report["verdicts"].get("No", 0) == 0
    assert not any("aten::empty" in r["npu_name"] for r in report["rows"])


# -- overflow origin ------------------------------------------------------------------------------------

class CausalAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) / 4.0
        scores = scores + torch.full((t, t), float("-inf")).triu(1)  # the usual causal mask
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return self.proj(scores.softmax(-1) @ v)


def overflow_step():
    torch.manual_seed(0)
    block = CausalAttention()
    x = torch.randn(2, 5, 16, requires_grad=True)
    y = block(x)
    total = torch.full((100,), 60000.0, dtype=torch.float16).sum()  # 6e6 in fp16: inf (forward)
    z = (y.pow(2).sum(-1) * 0).sqrt().sum()  # sqrt(0): its backward divides by zero
    z.backward()
    return total


def overflowing(path):
    return [(o["name"], o["phase"]) for o in manifest(path) if o["overflow"]]


@pytest.mark.parametrize("options", [{}, {"check_overflow": True}, {"stats_only": True}], ids=["all", "check", "stats"])
def test_overflow_is_where_inf_first_appears_not_the_mask(tmp_path, portkit, options):
    with dumper(dump_path=str(tmp_path / "d"), **options) as d:
        overflow_step()
    ops = manifest(tmp_path / "d")
    mask_ops = [o for o in ops if o["name"] in ("aten::full", "aten::triu", "aten::masked_fill", "aten::_softmax")]
    assert len(mask_ops) >= 4 and not any(o["overflow"] for o in mask_ops)
    assert any(t.get("inf") for o in mask_ops for t in o["tensors"])  # the mask does hold -inf
    found = overflowing(tmp_path / "d")
    assert found[0] == ("aten::sum", "forward"), found
    assert [f for f in found if f[1] == "backward"][0] == ("aten::div", "backward"), found
    assert d.overflows == len(found) == 2  # ops that only pass the inf on are not origins
    res = run([portkit, "overflow", str(tmp_path / "d")])
    assert res.returncode == 0, res.stderr
    assert "aten::sum" in res.stdout and "aten::div" in res.stdout


def test_portkit_overflow_names_the_origin_first(tmp_path, portkit):
    # Every operator with a non-finite output is listed (the -inf mask ops too), and the origin
    # row names the first one whose floating inputs were all finite: the forward sum.
    with dumper(dump_path=str(tmp_path / "d")):
        overflow_step()
    res = run([portkit, "overflow", str(tmp_path / "d")])
    origin = [line for line in res.stdout.splitlines() if line.replace(" ", "").startswith("|origin|")]
    assert origin and "aten::sum" in origin[0], res.stdout
    assert "aten::full" not in origin[0] and "aten::masked_fill" not in origin[0]


# -- phase ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("door", ["grad by name", "torch.autograd.grad", "backward by name", "Tensor.backward"])
def test_backward_phase_whatever_door(tmp_path, door):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Tanh())
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    before = torch.autograd.grad
    with dumper(dump_path=str(tmp_path / "d")):
        assert torch.autograd.grad is before  # nothing of torch is replaced
        y = net(x).sum()
        if door == "grad by name":
            autograd_grad(y, x)
        elif door == "torch.autograd.grad":
            torch.autograd.grad(y, x)
        elif door == "backward by name":
            autograd_backward(y)
        else:
            y.backward()
    ops = manifest(tmp_path / "d")
    phases = {o["name"]: o["phase"] for o in ops}
    assert phases["aten::convolution"] == "forward" and phases["aten::tanh"] == "forward"
    assert phases["aten::convolution_backward"] == "backward" and phases["aten::tanh_backward"] == "backward"
    assert [o["phase"] for o in ops] == sorted((o["phase"] for o in ops), key=lambda p: p == "backward")
