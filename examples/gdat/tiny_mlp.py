"""A small MLP for trying `portkit tune --job-type=4 --framework=pytorch` on a CPU:
    portkit tune --job-type=4 --framework=pytorch --model=tiny_mlp:make_model --input 16x256 --nproc 2 --output out
(run from examples/gdat/, or put it on PYTHONPATH)."""
import torch


def make_model():
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(256, 10))
    return torch.nn.Sequential(*layers)
