"""Minimal safetensors writing and reading with numpy only (no external package)."""
import json
import struct

import numpy as np

_TORCH_TO_ST = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}
_ST_TO_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_, "BF16": np.uint16}


def st_dtype(torch_dtype):
    return _TORCH_TO_ST.get(str(torch_dtype).replace("torch.", ""))


def tensor_bytes(t):
    """Raw little-endian bytes of a CPU tensor (bf16 through its 16-bit pattern)."""
    import torch
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write(path, entries, metadata=None):
    """entries: list of (key, st_dtype, shape, raw bytes). Written to path atomically by the caller."""
    header, offset, blobs = {}, 0, []
    for key, dtype, shape, raw in entries:
        header[key] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_torch(path, keys=None):
    """{key: torch tensor} with exact dtypes (BF16 kept as bfloat16); only `keys` when given."""
    import torch
    out = {}
    for key, (dtype, arr) in _read_raw(path, keys).items():
        if dtype == "BF16":
            out[key] = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
        else:
            out[key] = torch.from_numpy(arr.copy())
    return out


def _read_raw(path, keys=None):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for key, info in header.items():
        if key == "__metadata__" or (keys is not None and key not in keys):
            continue
        begin, end = info["data_offsets"]
        raw = data[8 + n + begin:8 + n + end]
        out[key] = (info["dtype"], np.frombuffer(raw, dtype=_ST_TO_NUMPY[info["dtype"]]).reshape(info["shape"]))
    return out


def read(path):
    """{key: numpy array} (BF16 widened to float32)."""
    out = {}
    for key, (dtype, arr) in _read_raw(path).items():
        if dtype == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[key] = arr
    return out
