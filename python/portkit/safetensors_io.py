"""Minimal safetensors writing and reading with numpy only (no external package).

Every torch dtype that safetensors names is kept exactly: F64 F32 F16 BF16, torch 2.1+'s fp8
(F8_E4M3 = float8_e4m3fn, F8_E5M2 = float8_e5m2), I64 I32 I16 I8, torch 2.3+'s U64 U32 U16, U8,
BOOL. numpy has no bf16 or fp8, so those travel as their bit patterns (uint16 / uint8).
"""
import json
import struct

import numpy as np

_TORCH_TO_ST = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
                "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "int64": "I64", "int32": "I32",
                "int16": "I16", "int8": "I8", "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8",
                "bool": "BOOL"}
_ST_TO_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8,
                "BOOL": np.bool_, "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8}
# Dtypes numpy cannot hold (or torch cannot convert to numpy on every version): the signed integer
# of the same size whose bytes torch can view them as.
_BIT_VIEW = {"BF16": "int16", "F8_E4M3": "int8", "F8_E5M2": "int8", "U16": "int16", "U32": "int32", "U64": "int64"}
_TORCH_NAME = {st: name for name, st in _TORCH_TO_ST.items()}


def st_dtype(torch_dtype):
    """The safetensors name of a torch dtype, or None if safetensors has none (complex, fp8 fnuz, ...)."""
    return _TORCH_TO_ST.get(str(torch_dtype).replace("torch.", ""))


def tensor_bytes(t, copy=True):
    """Raw little-endian bytes of a tensor (bf16, fp8 and unsigned ints through their bit patterns).
    With copy=False, a read-only memoryview of the tensor's own memory when it is a contiguous host
    tensor (no copy; valid while the tensor's values do not change), of a host copy otherwise."""
    import torch
    t = t.detach().contiguous().cpu()
    view = _BIT_VIEW.get(st_dtype(t.dtype))
    arr = t.view(getattr(torch, view)).numpy() if view is not None else t.numpy()
    if copy:
        return arr.tobytes()
    return memoryview(arr.reshape(-1).view(np.uint8)).toreadonly()


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
        view = _BIT_VIEW.get(dtype)
        if view is not None:
            torch_dtype = getattr(torch, _TORCH_NAME[dtype], None)
            if torch_dtype is None:
                raise TypeError("%s: %s needs a newer torch (no torch.%s in %s)"
                                % (key, dtype, _TORCH_NAME[dtype], torch.__version__))
            out[key] = torch.from_numpy(arr.view(getattr(np, view)).copy()).view(torch_dtype)
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


def _fp8_to_float32(bits, dtype):
    """fp8 bit patterns (uint8) to float32: E4M3 ("fn": bias 7, no infinities, S.1111.111 is NaN)
    or E5M2 (the top byte of an fp16)."""
    if dtype == "F8_E5M2":
        return (bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    b = bits.astype(np.int32)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, mant = (b >> 3) & 0xF, b & 0x7
    value = np.where(exp == 0, np.ldexp(mant.astype(np.float64), -9),
                     np.ldexp((mant | 0x8).astype(np.float64), exp - 10))
    value = np.where((exp == 0xF) & (mant == 0x7), np.nan, value)
    return (sign * value).astype(np.float32)


def read(path):
    """{key: numpy array} (BF16 and fp8 widened to float32)."""
    out = {}
    for key, (dtype, arr) in _read_raw(path).items():
        if dtype == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        elif dtype in ("F8_E4M3", "F8_E5M2"):
            arr = _fp8_to_float32(arr, dtype)
        out[key] = arr
    return out
