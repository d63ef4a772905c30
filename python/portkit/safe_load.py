"""Reading data files without running code from them: the one loader of the Python companion.

Policy (docs/safety.md, "Code run in this process"):

- A ``.pt`` file is read with ``torch.load(..., weights_only=True)``, torch's restricted unpickler,
  and nothing else. Where this torch's ``torch.load`` has no ``weights_only`` parameter, or the
  restricted load fails for any reason, the file is refused (:class:`RefusedFile`, naming it):
  it is never unpickled in full, so a payload after whatever made the restricted load fail never
  runs.
- A TorchScript archive (a zip holding ``constants.pkl`` or ``code/``) runs its code when loaded,
  and ``torch.load`` before torch 2.6 hands one to ``torch.jit.load`` even with
  ``weights_only=True``. It is recognised first, with torch's own zip reader, and refused unless the
  caller passes ``trust_torchscript=True``.
- A ``.npy`` file is read with ``numpy.load(..., allow_pickle=False)``.
- A file named inside a data file is resolved inside that data's own folder
  (:func:`resolve_inside`) and, where a content hash was recorded, checked against it
  (:func:`open_verified`).

The file is opened once and every check and the load go through that one handle, so a name
swapped between the check and the load changes nothing.
"""
import hashlib
import inspect
import os
import stat


class RefusedFile(ValueError):
    """A file that is not read because reading it could run code from it (or it is not what it
    claims to be). The message names the file and says what to do."""


def _open_regular(path):
    """A binary handle on ``path``, which must be a regular file (a FIFO or device could block)."""
    f = open(path, "rb")
    try:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise RefusedFile("%s: not a regular file; not read" % path)
    except BaseException:
        f.close()
        raise
    return f


def has_weights_only(torch):
    """Whether this torch's ``torch.load`` takes ``weights_only`` (torch 1.13 and later)."""
    return "weights_only" in inspect.signature(torch.load).parameters


def _torchscript_records(torch, f):
    """The record names of the zip archive ``f`` as torch's own reader lists them (the reader
    ``torch.load`` uses), or None when ``f`` is not a zip archive by torch's test (its first bytes)."""
    start = f.tell()
    magic = f.read(4)
    f.seek(start)
    if magic != b"PK\x03\x04":
        return None
    try:
        reader = torch._C.PyTorchFileReader(f)
        return list(reader.get_all_records())
    finally:
        f.seek(start)


def is_torchscript(torch, f):
    """Whether the open file ``f`` is a TorchScript archive (what ``torch.load`` would hand to
    ``torch.jit.load``): ``constants.pkl`` or a ``code/`` folder among its records."""
    records = _torchscript_records(torch, f) or []
    return any(r == "constants.pkl" or r.startswith("code/") or r.endswith("/constants.pkl") for r in records)


def load_torch_file(path, trust_torchscript=False, map_location="cpu"):
    """What the torch.save file ``path`` holds, read by torch's restricted unpickler only.

    Raises :class:`RefusedFile` when this torch cannot load it restricted (no ``weights_only``),
    when the restricted load fails, and for a TorchScript archive unless ``trust_torchscript``
    (then ``torch.jit.load`` runs its code, as the caller asked)."""
    import torch

    with _open_regular(path) as f:
        try:
            script = is_torchscript(torch, f)
        except Exception as e:  # noqa: BLE001 - torch.load would fail on it too
            raise RefusedFile("%s: not a readable torch.save archive (%s)" % (path, e)) from None
        if script:
            if not trust_torchscript:
                raise RefusedFile(
                    "%s: a TorchScript archive; loading it runs the code inside it, so it is refused. "
                    "Load it only if you trust its source (--trust-torchscript, or trust_torchscript=True)"
                    % path)
            return torch.jit.load(f, map_location=map_location)
        if not has_weights_only(torch):
            raise RefusedFile(
                "%s: torch %s has no torch.load(weights_only=True), and a full unpickle could run code "
                "from the file: refused. Use torch 1.13 or later" % (path, torch.__version__))
        try:
            return torch.load(f, map_location=map_location, weights_only=True)
        except Exception as e:  # noqa: BLE001 - every failure refuses; nothing falls back to pickle
            raise RefusedFile(
                "%s: refused: torch.load(weights_only=True) cannot read it as plain tensor data (%s); "
                "it was not unpickled any further, so nothing in it ran" % (path, _reason(e))) from None


def _reason(e):
    """One line saying why torch's restricted load failed. torch 2.x wraps the unpickler's reason in
    advice to load the file with weights_only=False or to allow-list the global: left out here."""
    reason = ""
    for line in str(e).splitlines():
        line = line.split("WeightsUnpickler error:", 1)[-1].strip()
        if line and not any(advice in line for advice in ("Weights only load failed", "weights_only",
                                                           "Alternatively", "Check the documentation")):
            reason = line.split(". Please use", 1)[0]
            break
    return "%s: %s" % (type(e).__name__, reason[:300])


def load_numpy_file(path):
    """The array in the ``.npy`` file ``path`` (``allow_pickle=False``: an object array is refused)."""
    import numpy as np

    with _open_regular(path) as f:
        try:
            value = np.load(f, allow_pickle=False)
        except Exception as e:  # noqa: BLE001
            raise RefusedFile("%s: not a plain .npy array (%s: %s); nothing in it ran"
                              % (path, type(e).__name__, e)) from None
        if not isinstance(value, np.ndarray):
            raise RefusedFile("%s: holds a %s, not one array" % (path, type(value).__name__))
        return value


def load_tensor(path, trust_torchscript=False):
    """The tensor in a ``.pt`` (torch.save) or ``.npy`` file, as a torch tensor on the CPU."""
    import torch

    if path.endswith(".npy"):
        return torch.from_numpy(load_numpy_file(path))
    value = load_torch_file(path, trust_torchscript=trust_torchscript)
    if not isinstance(value, torch.Tensor):
        raise RefusedFile("%s: holds a %s, not a tensor" % (path, type(value).__name__))
    return value


def resolve_inside(folder, name, what="file"):
    """``folder/name`` for a file name read from a data file in ``folder``: refused
    (:class:`RefusedFile`) unless it is a relative path without ``..`` that stays inside the folder
    once links are followed."""
    if not isinstance(name, str) or not name or "\0" in name:
        raise RefusedFile("%s: %s name %r is not a file name" % (folder, what, name))
    if os.path.isabs(name):
        raise RefusedFile("%s: %s %r is an absolute path; only files inside the folder are read"
                          % (folder, what, name))
    if ".." in name.replace("\\", "/").split("/"):
        raise RefusedFile("%s: %s %r goes up with '..'; only files inside the folder are read"
                          % (folder, what, name))
    root = os.path.realpath(folder)
    path = os.path.join(folder, name)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root or real == root:
        raise RefusedFile("%s: %s %r leads through a link to %s, outside the folder; only files inside it are read"
                          % (folder, what, name, real))
    return path


def sha256_of(path):
    """The SHA-256 of a file's content, as lower-case hex."""
    with _open_regular(path) as f:
        return _digest(f)


def _digest(f):
    h = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def open_verified(path, sha256):
    """An open binary handle on ``path`` whose content has the SHA-256 ``sha256`` (hex), positioned
    at the start; the caller reads the file through it, so what was checked is what is loaded."""
    f = _open_regular(path)
    try:
        got = _digest(f)
        if got != str(sha256).lower():
            raise RefusedFile("%s: its content changed since it was written (sha256 %s, recorded %s); "
                              "not loaded" % (path, got, sha256))
        f.seek(0)
    except BaseException:
        f.close()
        raise
    return f
