"""python -m portkit.export_ops on a real torch model, then portkit tune on its op list."""
import json
import os

from conftest import HERE, run

PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))

MODEL_SRC = '''
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.act = nn.ReLU()
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10, bias=False)

    def forward(self, x):
        x = self.act(self.conv1(x))
        x = self.act(self.conv2(x))
        x = x.flatten(1)
        return self.fc2(self.act(self.fc1(x)))

def make():
    return Net()
'''


def export(tmp_path, python):
    (tmp_path / "tinynet.py").write_text(MODEL_SRC)
    out = tmp_path / "ops.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    res = run([python, "-m", "portkit.export_ops", "--model", "tinynet:make", "--input", "2x3x8x8",
               "-o", str(out)], cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text()), out, res


def test_export_ops_maps_linear_and_conv(tmp_path, python):
    ops, _, res = export(tmp_path, python)
    assert "wrote" in res.stderr
    assert ops["name"] == "tinynet"
    by_name = {o["op_name"]: o for o in ops["ops"]}
    assert by_name["conv1"] == {"op_name": "conv1", "op_type": "Conv2D", "inputs": [[2, 3, 8, 8], [8, 3, 3, 3]],
                                "attrs": {"stride": [1, 1], "padding": [1, 1], "groups": 1, "bias": True},
                                "dtype": "float32", "count": 1}
    assert by_name["conv2"]["inputs"] == [[2, 8, 8, 8], [8, 4, 3, 3]]
    assert by_name["conv2"]["attrs"] == {"stride": [2, 2], "padding": [1, 1], "groups": 2, "bias": False}
    assert by_name["fc1"]["op_type"] == "MatMul"
    assert by_name["fc1"]["inputs"] == [[2, 128], [128, 32]]
    assert by_name["fc1"]["attrs"] == {"bias": True}
    assert by_name["fc2"]["inputs"] == [[2, 32], [32, 10]]
    assert by_name["fc2"]["attrs"] == {"bias": False}
    # The shared ReLU runs three times on three shapes: three entries, listed (untuned) by class.
    relus = [o for o in ops["ops"] if o["op_type"] == "ReLU"]
    assert len(relus) == 3 and all(o["count"] == 1 for o in relus)
    assert [o["op_name"] for o in relus] == ["act", "act#2", "act#3"]


def test_export_ops_errors_name_the_argument(tmp_path, python):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    res = run([python, "-m", "portkit.export_ops", "--model", "nomodule", "--input", "2x3", "-o",
               str(tmp_path / "x.json")], cwd=tmp_path, env=env)
    assert res.returncode == 2 and "expected module:callable" in res.stderr
    res = run([python, "-m", "portkit.export_ops", "--model", "a:b", "--input", "2xq", "-o",
               str(tmp_path / "x.json")], cwd=tmp_path, env=env)
    assert res.returncode == 2 and "--input '2xq': expected dimensions like 8x3x224x224" in res.stderr
    res = run([python, "-m", "portkit.export_ops", "--model", "a:b", "--input", "int65:2x3", "-o",
               str(tmp_path / "x.json")], cwd=tmp_path, env=env)
    assert res.returncode == 2 and "--input 'int65:2x3': unknown dtype 'int65'" in res.stderr


EMBED_SRC = '''
import torch.nn as nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, ids, scale):
        return self.head(self.embed(ids)) * scale

def make():
    return Tagger()
'''


def test_export_ops_takes_int64_inputs_as_tune_does(tmp_path, python):
    # Token ids are int64: the same [DTYPE:]SHAPE syntax as `portkit tune --framework=pytorch --input`.
    (tmp_path / "tagger.py").write_text(EMBED_SRC)
    out = tmp_path / "ops.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    res = run([python, "-m", "portkit.export_ops", "--model", "tagger:make", "--input", "int64:2x5,1",
               "-o", str(out)], cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    by_name = {o["op_name"]: o for o in json.loads(out.read_text())["ops"]}
    assert by_name["embed"]["op_type"] == "Embedding"
    assert by_name["embed"]["inputs"] == [[2, 5]] and by_name["embed"]["dtype"] == "int64"
    assert by_name["head"]["op_type"] == "MatMul" and by_name["head"]["inputs"] == [[10, 16], [16, 4]]


def test_tune_accepts_the_exported_list(tmp_path, python, portkit):
    _, ops_file, _ = export(tmp_path, python)
    pin = ["--fix", "MC=48", "--fix", "NC=768", "--fix", "KC=128", "--fix", "MR=4", "--fix", "NR=16",
           "--fix", "VW=16", "--fix", "PACK_A=1", "--fix", "ORDER=0", "--fix", "UNROLL=1,4", "--fix", "THREADS=1"]
    res = run([portkit, "tune", "--job-type=2", "--model", str(ops_file), "--tune-bank", str(tmp_path / "bank"),
               "--output", str(tmp_path / "out"), "--max-evals", "1"] + pin)
    assert res.returncode == 0, res.stderr
    assert "Aoe process finished" in res.stderr
    results = [f for f in os.listdir(tmp_path / "out") if f.startswith("aoe_result_opat_")]
    assert len(results) == 1
    result = json.loads((tmp_path / "out" / results[0]).read_text())
    summary = result["OPAT"]["repo_summary"]
    assert summary["total_num"] == 4
    assert summary["repo_add_num"] + summary["repo_unsatisfied_num"] == 4
    untuned = {o["op_name"] for o in result["OPAT"]["untuned_operators"]}
    assert untuned == {"act", "act#2", "act#3"}



SAME_SRC = '''
import torch.nn as nn

class Same(nn.Module):
    def __init__(self):
        super().__init__()
        self.odd = nn.Conv2d(3, 4, 3, padding="same")   # total padding 2: 1 on each side
        self.even = nn.Conv2d(4, 4, 4, padding="same")  # total padding 3: PyTorch pads 1 then 2

    def forward(self, x):
        return self.even(self.odd(x))

def make():
    return Same()
'''


def test_same_padding_with_an_even_kernel_is_not_exported_as_symmetric(tmp_path, python, portkit):
    (tmp_path / "samenet.py").write_text(SAME_SRC)
    out = tmp_path / "ops.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    res = run([python, "-m", "portkit.export_ops", "--model", "samenet:make", "--input", "1x3x8x8",
               "-o", str(out)], cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    by_name = {o["op_name"]: o for o in json.loads(out.read_text())["ops"]}
    assert by_name["odd"]["op_type"] == "Conv2D"
    assert by_name["odd"]["attrs"]["padding"] == [1, 1]
    # Asymmetric padding cannot be described as stride/padding pairs: its own (untuned) type.
    assert by_name["even"]["op_type"] == "Conv2D_asymmetric_same_padding"
    res = run([portkit, "tune", "--model", str(out), "--tune-bank", str(tmp_path / "bank"), "--output",
               str(tmp_path / "res"), "--max-evals", "1", "--fix", "MR=4", "--fix", "NR=16", "--fix", "VW=16",
               "--fix", "THREADS=1", "--fix", "MC=48", "--fix", "NC=768", "--fix", "KC=128"])
    assert res.returncode == 0, res.stderr
    assert "even (Conv2D_asymmetric_same_padding) is not tuned" in res.stderr
