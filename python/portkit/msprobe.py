"""msprobe (mindstudio-probe) tensor-mode dumps as portkit dumps.

    python -m portkit.msprobe [--trust-torchscript] MSPROBE_DUMP/step0/rank0 OUT_DUMP

msprobe's tensor mode keeps every tensor in `dump_tensor_data/<data_name>`: a `.pt` file written by
torch.save (PyTorch) or a `.npy` file (MindSpore, and arrays). `portkit compare` reads such a dump by
itself in any mode (statistics, md5, and tensor mode from these files, with its own reader of the
torch.save zip and a pickle interpreter that runs nothing); this companion instead loads each file
through portkit.safe_load (torch.load with weights_only=True only, numpy.load without pickles; a file
either cannot read is refused, never unpickled in full, and a TorchScript archive is refused unless
--trust-torchscript is given, since loading one runs its code) and writes a portkit dump (to keep,
extract or convert it with portkit's tools): manifest.jsonl plus op_NNNNNN.safetensors, one operator per
dump.json call in the same order, with the same names (`Functional.conv2d`, phase forward/backward)
and the same tensor keys portkit's reader of dump.json gives them (input_args and input_kwargs, or a
backward call's input, flattened as input.0, input.1.0, input.bias; output.0, ...), so a converted
dump pairs with a statistics-mode dump of the same run. Tensors whose file is missing or unreadable
are listed with a note (compared as N/A, never dropped); msprobe's requires_grad and the first line
of the call's stack (stack.json) are kept.
"""
import json
import os
import sys
import zlib

from . import safe_load, safetensors_io


def _flatten(value, prefix, out):
    """(key, tensor record) pairs in the order of portkit's C++ reader (src/accuracy/msprobe_dump.cc)."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(v, "%s.%d" % (prefix, i), out)
    elif isinstance(value, dict):
        if value.get("type") == "torch.Tensor":
            out.append((prefix, value))
        elif "type" not in value:  # a kwargs dict
            for k, v in value.items():
                _flatten(v, "%s.%s" % (prefix, k), out)
    return out


def _split_name(key):
    """'Functional.conv2d.0.forward' -> ('Functional.conv2d', 'forward'); 'Module.fc.Linear.forward.0'
    -> ('Module.fc.Linear', 'forward'); None for other keys."""
    parts = key.split(".")
    if len(parts) < 3:
        return None
    if parts[-1] in ("forward", "backward") and parts[-2].isdigit():
        return ".".join(parts[:-2]), parts[-1]
    if parts[-1].isdigit() and parts[-2] in ("forward", "backward"):
        return ".".join(parts[:-2]), parts[-2]
    return None


def _stack_lines(folder):
    """{call name: first stack line} from stack.json ({"0": [[names], [lines]]} or {name: [lines]})."""
    path = os.path.join(folder, "stack.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            stacks = json.load(f)
    except (OSError, ValueError):
        return {}
    out = {}
    for key, value in (stacks.items() if isinstance(stacks, dict) else []):
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list):
            names, lines = value
            for n in names:
                out[n] = lines[0] if lines else ""
        elif isinstance(value, list):
            out[key] = value[0] if value else ""
    return out


def convert(src, out, trust_torchscript=False):
    """Writes the portkit dump `out` from the msprobe step/rank folder `src`; returns (operators,
    tensors written, problems). A data file that could run code when loaded is a problem, not
    loaded (``trust_torchscript=True`` loads TorchScript archives, running their code)."""
    from .torch.dumper import _Stats  # statistics exactly as portkit's own dumper records them
    dump_json = os.path.join(src, "dump.json")
    with open(dump_json, encoding="utf-8") as f:
        doc = json.load(f)
    data = doc.get("data")
    if not isinstance(data, dict):
        raise ValueError("%s: no \"data\" object; not an msprobe dump.json" % dump_json)
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, "manifest.jsonl")):
        raise FileExistsError("%s already holds a dump" % out)
    tensor_dir = os.path.join(src, "dump_tensor_data")
    stacks = _stack_lines(src)
    problems, written, index = [], 0, 0
    with open(os.path.join(out, "manifest.jsonl"), "x", encoding="utf-8") as manifest:
        for key, call in data.items():
            split = _split_name(key)
            if split is None or not isinstance(call, dict):
                continue
            name, phase = split
            records = []
            for part, prefix in (("input_args", "input"), ("input_kwargs", "input"), ("input", "input"),
                                 ("output", "output")):
                if part in call:
                    _flatten(call[part], prefix, records)
            entry = {"index": index, "name": name, "call": key, "kind": name.split(".")[0], "phase": phase,
                     "module": name[7:] if name.startswith("Module.") else "", "stack": stacks.get(key, ""),
                     "overflow": False, "file": None, "tensors": []}
            blobs = []
            for tkey, rec in records:
                info = {"key": tkey, "dtype": str(rec.get("dtype", "")).replace("torch.", ""),
                        "shape": rec.get("shape", [])}
                if "requires_grad" in rec:
                    info["requires_grad"] = bool(rec["requires_grad"])
                data_name = rec.get("data_name")
                if not data_name or not isinstance(data_name, str):
                    info["note"] = "no data file in the msprobe dump"
                    entry["tensors"].append(info)
                    continue
                try:
                    path = safe_load.resolve_inside(tensor_dir, data_name, "data_name")
                    t = safe_load.load_tensor(path, trust_torchscript=trust_torchscript)
                except Exception as e:  # noqa: BLE001  (reported per tensor, the rest converted)
                    info["note"] = "%s: cannot be read (%s)" % (data_name, e)
                    problems.append(info["note"])
                    entry["tensors"].append(info)
                    continue
                dtype = safetensors_io.st_dtype(t.dtype)
                info["data_name"] = data_name
                if dtype is None:
                    info["note"] = "not converted: safetensors has no element type for %s" % t.dtype
                    entry["tensors"].append(info)
                    continue
                raw = safetensors_io.tensor_bytes(t)
                info.update(dtype=dtype, shape=list(t.shape))
                info.update(_Stats.of(t))
                info["crc32"] = zlib.crc32(raw)
                entry["tensors"].append(info)
                blobs.append((tkey, dtype, tuple(t.shape), raw))
            entry["overflow"] = any(t.get("key", "").startswith("output") and (t.get("nan") or t.get("inf"))
                                    for t in entry["tensors"])
            if blobs:
                fname = "op_%06d.safetensors" % index
                tmp = os.path.join(out, fname + ".tmp")
                safetensors_io.write(tmp, blobs, {"name": name, "phase": phase, "msprobe": key})
                os.replace(tmp, os.path.join(out, fname))
                entry["file"] = fname
                written += len(blobs)
            manifest.write(json.dumps(entry) + "\n")
            index += 1
    with open(os.path.join(out, "dump_complete.json"), "w", encoding="utf-8") as f:
        json.dump({"records": index}, f)
        f.write("\n")
    return index, written, problems


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    trust_torchscript = "--trust-torchscript" in argv
    argv = [a for a in argv if a != "--trust-torchscript"]
    if len(argv) != 2 or argv[0] in ("-h", "--help") or argv[0].startswith("-"):
        sys.stderr.write("usage: python -m portkit.msprobe [--trust-torchscript] MSPROBE_DUMP/stepN/rankR OUT_DUMP\n"
                         "  --trust-torchscript  load TorchScript data files with torch.jit.load, which runs their\n"
                         "                       code (refused without it)\n")
        return 2
    src, out = argv
    if not os.path.isfile(os.path.join(src, "dump.json")):
        sys.stderr.write("%s: no dump.json (give an msprobe stepN/rankR folder)\n" % src)
        return 2
    try:
        ops, tensors, problems = convert(src, out, trust_torchscript=trust_torchscript)
    except (OSError, ValueError) as e:
        sys.stderr.write("%s\n" % e)
        return 2
    for p in problems:
        sys.stderr.write("warning: %s\n" % p)
    print("Converted %d calls, %d tensors from %s into %s" % (ops, tensors, src, out))
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
