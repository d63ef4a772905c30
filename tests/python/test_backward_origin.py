"""Backward operators carry the forward operator they derive from (its index, name and autograd
node) and that operator's module and stack, in the dump and in compare's CSV, JSON and HTML.
Runs under torch 1.13 (node pre-hooks) and torch 2.x (the engine's current node)."""
import csv
import json
import os
import sys

import torch

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit.torch import dumper  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.fc2 = torch.nn.Linear(5, 3)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))  # the functional tanh: its module is Net
        return self.fc2(h * 2.0)


def dump(path, scale=1.0):
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(4, 6) * scale
    with dumper(dump_path=str(path)):
        loss = net(x).pow(2).sum()
        loss.backward()
    with open(os.path.join(str(path), "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_backward_ops_name_their_forward_op_module_and_stack(tmp_path):
    ops = dump(tmp_path / "d")
    by_index = {o["index"]: o for o in ops}
    forward_ops = [o for o in ops if o["phase"] == "forward"]
    assert forward_ops and all("forward" not in o for o in forward_ops)
    derived = [o for o in ops if o["phase"] == "backward" and "forward" in o]
    names = {o["name"] for o in derived}
    assert {"aten::tanh_backward", "aten::mm"} <= names, names
    for o in derived:
        origin = by_index[o["forward"]["index"]]
        assert origin["phase"] == "forward" and origin["name"] == o["forward"]["name"]
        assert o["forward"]["node"].endswith("Backward0") or o["forward"]["node"].endswith("Backward1")
        assert o["module"] == origin["module"] and o["stack"] == origin["stack"]
        assert origin["index"] < o["index"]
    tanh_bwd = next(o for o in derived if o["name"] == "aten::tanh_backward")
    assert tanh_bwd["forward"]["name"] == "aten::tanh" and tanh_bwd["forward"]["node"] == "TanhBackward0"
    assert tanh_bwd["module"] == "Net" and "test_backward_origin.py" in tanh_bwd["stack"]
    # The gradient of fc2's weight: an mm of AddmmBackward0 of fc2's addmm, in module Net.fc2.
    fc2 = [o for o in derived if o["forward"]["node"] == "AddmmBackward0" and o["module"] == "Net.fc2"]
    assert fc2 and all(by_index[o["forward"]["index"]]["module"] == "Net.fc2" for o in fc2)
    # pow's backward (the loss) and the multiplication by 2 are found too.
    assert {"PowBackward0", "MulBackward0"} <= {o["forward"]["node"] for o in derived}


def test_compare_shows_the_forward_op_of_backward_rows(tmp_path, portkit):
    dump(tmp_path / "ref")
    dump(tmp_path / "tgt", scale=1.001)
    out = tmp_path / "cmp"
    r = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(out)])
    assert r.returncode in (0, 1), r.stderr
    with open(out / "compare_result.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    backward = [row for row in rows if ".backward." in row["NPU Name"]]
    forward = [row for row in rows if ".forward." in row["NPU Name"]]
    assert backward and forward
    assert all(row["NPU Forward Op"] == "" for row in forward)
    tanh_rows = [row for row in backward if row["NPU Name"].startswith("aten::tanh_backward.")]
    assert tanh_rows and all(row["NPU Forward Op"].startswith("aten::tanh #") and
                             row["NPU Forward Op"].endswith("(TanhBackward0)") for row in tanh_rows)
    with open(out / "compare_result.json") as f:
        report = json.load(f)
    json_fwd = {row["npu_name"]: row.get("forward") for row in report["rows"]}
    for row in rows:
        assert json_fwd[row["NPU Name"]] == (row["NPU Forward Op"] or None)
    with open(out / "compare_report.html", encoding="utf-8") as f:
        html = f.read()
    # The worst outputs list each backward output with its forward operator.
    table = html[html.index("<h2>Worst outputs</h2>"):]
    table = table[:table.index("</table>")]
    listed = [cell.split("</td>")[0] for cell in table.split("<tr><td>")[1:]]
    assert any(".backward." in name for name in listed), listed
    for name in listed:
        assert (".backward." in name) == ("(backward of aten::" in name), name
