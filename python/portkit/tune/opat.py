"""OPAT kernels inside PyTorch: portkit's tuned GEMM kernels as a torch custom operator.

``torch.ops.portkit.linear(x, weight, bias)`` computes ``torch.nn.functional.linear`` (x[..., K],
weight[N, K], bias[N] or None). It runs a tuned kernel (a ``kernels/<hash>.so`` that
``portkit tune`` built into its bank) when one is registered for that exact shape and the tensors
are contiguous float32 on the CPU, and torch's own ``linear`` otherwise (the fallback: untuned
shapes, other dtypes, other devices). Backward always goes through torch's ops, so training works;
a weight changed in place (an optimiser step) is noticed through its version counter.

The operator is defined with ``torch.library`` (torch 1.13 and 2.x), so TorchScript (script,
freeze) can call it like any ``torch.ops`` function. Kernels are reentrant (thread-local scratch,
a persistent pool), and the registry is guarded by a lock, so several threads may call it.

A kernel is routed (registered) only when it beats torch's own op by more than the noise
(:func:`compare_with_torch`): the same rule as ``portkit tune`` (docs/tune.md, "When is a
candidate better"): n >= 5 interleaved pairs, speed-ups r_i = torch_i / tuned_i, the lower
bound of a one-sided 90 % sign-test interval of their median must exceed 1 and the median must
be >= 1 + min_gain.

    from portkit.tune import opat
    fn = opat.load_kernel("bank/kernels/1a2b....so")
    cmp = opat.route_if_faster(fn, m=8, n=256, k=512, bias=True)   # registers only if it wins
    y = torch.ops.portkit.linear(x, w, b)
"""
import ctypes
import hashlib
import math
import os
import stat
import threading
import time
import weakref

import torch

_lock = threading.Lock()
_library = None
_kernels = {}   # (M, N, K, has_bias) -> (ctypes function, its dims argument)
_loaded = {}    # sha256 of the file -> ctypes.CDLL (kept alive)
_weights = {}   # id of the weight tensor -> (weak reference, (data_ptr, version, shape), transposed copy)
_MAX_WEIGHTS = 256


class KernelError(RuntimeError):
    """A kernel file that cannot or must not be loaded."""


# ----------------------------------------------------------------------------- the operator

def _transposed(weight):
    """weight[N, K] as a contiguous [K, N] copy (the kernel's B), cached until the weight changes."""
    # Keyed by id, checked by a weak reference (an id is reused once its tensor is freed) and by
    # the storage pointer, version counter and shape (in-place updates, resized storage).
    key = id(weight)
    stamp = (weight.data_ptr(), weight._version, tuple(weight.shape))
    hit = _weights.get(key)  # a single dict read is atomic under the GIL
    if hit is not None and hit[0]() is weight and hit[1] == stamp:
        return hit[2]
    wt = weight.detach().t().contiguous()
    with _lock:
        if len(_weights) >= _MAX_WEIGHTS:
            _weights.clear()
        _weights[key] = (weakref.ref(weight), stamp, wt)
    return wt


def _kernel_for(x, weight, bias):
    if x.device.type != "cpu" or x.dtype != torch.float32 or weight.dtype != torch.float32:
        return None, 0, 0, 0
    if bias is not None and (bias.dtype != torch.float32 or bias.dim() != 1):
        return None, 0, 0, 0
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        return None, 0, 0, 0
    k = int(weight.shape[1])
    n = int(weight.shape[0])
    m = int(x.numel() // k) if k else 0
    entry = _kernels.get((m, n, k, bias is not None))  # atomic under the GIL; writers hold _lock
    return entry, m, n, k


def _linear_forward(x, weight, bias):
    """CPU implementation: the tuned kernel for a registered shape, torch's linear otherwise."""
    entry, m, n, k = _kernel_for(x, weight, bias)
    if entry is None or m == 0:
        return torch.nn.functional.linear(x, weight, bias)
    fn, dims = entry
    a = x.detach().contiguous()
    b = _transposed(weight)
    c = bias.detach().contiguous() if bias is not None else None
    out = torch.empty(tuple(x.shape[:-1]) + (n,), dtype=torch.float32)
    ptrs = (ctypes.c_void_p * 3)(a.data_ptr(), b.data_ptr(), c.data_ptr() if c is not None else None)
    fn(ptrs, out.data_ptr(), dims)  # ctypes releases the GIL during the call
    return out


class _LinearFunction(torch.autograd.Function):
    """Forward through the (possibly tuned) kernel, backward through torch's ops."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return torch.ops.portkit.linear_forward(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = grad.matmul(weight)
        g2 = grad.reshape(-1, grad.shape[-1])
        if ctx.needs_input_grad[1]:
            gw = g2.t().matmul(x.reshape(-1, x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g2.sum(0)
        return gx, gw, gb


def _linear_autograd(x, weight, bias):
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                    or (bias is not None and bias.requires_grad)):
        return _LinearFunction.apply(x, weight, bias)
    return _linear_forward(x, weight, bias)  # inference: no graph to record, skip the Function


def _linear_cpu(x, weight, bias):
    return _linear_forward(x, weight, bias)


def ensure_registered():
    """Defines ``torch.ops.portkit.linear`` (and its forward ``linear_forward``) once."""
    global _library
    with _lock:
        if _library is not None:
            return
        lib = torch.library.Library("portkit", "DEF")
        lib.define("linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor")
        lib.define("linear_forward(Tensor x, Tensor weight, Tensor? bias) -> Tensor")
        lib.impl("linear_forward", _linear_forward, "CPU")
        lib.impl("linear", _linear_cpu, "CPU")
        lib.impl("linear", _linear_autograd, "Autograd")
        _library = lib


# ----------------------------------------------------------------------------- kernels

def load_kernel(path, sha256=None):
    """The ``portkit_kernel`` entry of a GEMM kernel built by ``portkit tune``. The file must be
    owned by this user (or root) and not writable by group or others: loading a shared object
    runs its code. ``sha256``: the content hash it must have (an artifact's record of the kernel
    it saved). The checks, the hash and the load go through one open descriptor, so a file
    swapped in between is never the one loaded."""
    real = os.path.realpath(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise KernelError("%s: %s" % (path, e.strerror)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KernelError("%s: not a regular file" % path)
        if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
            raise KernelError("%s: owned by another user or writable by group/others; not loaded" % path)
        digest = _fd_sha256(fd)
        if sha256 is not None and digest != str(sha256).lower():
            raise KernelError("%s: its content changed since the artifact was saved (sha256 %s, recorded %s); "
                              "not loaded" % (path, digest, sha256))
        source = os.path.splitext(real)[0] + ".cc"
        if os.path.exists(source):
            with open(source, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if "dims = {M, N, K}" not in text:
                raise KernelError("%s: not a GEMM kernel (its source %s has another entry point)" % (path, source))
        with _lock:
            lib = _loaded.get(digest)
            if lib is None:
                try:
                    lib = ctypes.CDLL("/proc/self/fd/%d" % fd)
                except OSError as e:
                    raise KernelError("%s: %s" % (path, e)) from None
                # The descriptor stays open as long as the library is loaded: the dynamic loader
                # knows a loaded object by its name, and a second "/proc/self/fd/N" with a reused
                # N would be given this library instead of the file behind it.
                _loaded[digest], fd = lib, None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        fn = lib.portkit_kernel
    except AttributeError:
        raise KernelError("%s: no portkit_kernel entry" % path) from None
    fn.restype = None
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)]
    return fn


def _fd_sha256(fd):
    h = hashlib.sha256()
    offset = 0
    while True:
        block = os.pread(fd, 1 << 20, offset)
        if not block:
            return h.hexdigest()
        h.update(block)
        offset += len(block)


def find_kernel(bank, config):
    """The kernel ``.so`` in ``<bank>/kernels`` whose source was generated for GEMM configuration
    ``config`` (the bank's strategy key, e.g. ``MC=96,NC=1536,...``), or None."""
    folder = os.path.join(os.path.abspath(bank), "kernels")
    want = "// portkit tune candidate: " + config + "\n"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    for name in names:
        if not name.endswith(".cc"):
            continue
        so = os.path.join(folder, name[:-3] + ".so")
        if not os.path.exists(so):
            continue
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        if text.startswith(want) and "dims = {M, N, K}" in text:
            return so
    return None


def register(fn, m, n, k, bias):
    """Routes linear calls of this shape (x with m rows of k, weight [n, k]) to ``fn``."""
    ensure_registered()
    with _lock:
        _kernels[(int(m), int(n), int(k), bool(bias))] = (fn, (ctypes.c_long * 3)(int(m), int(n), int(k)))


def unregister(m=None, n=None, k=None, bias=None):
    """Removes one shape's kernel (or every kernel when called without arguments)."""
    with _lock:
        if m is None:
            _kernels.clear()
            _weights.clear()
        else:
            _kernels.pop((int(m), int(n), int(k), bool(bias)), None)


def registered():
    with _lock:
        return sorted(_kernels)


# ----------------------------------------------------------------------------- routing rule

def sign_test_k(n, alpha=0.10):
    """The largest k with P(Binomial(n, 1/2) <= k - 1) <= alpha (0 when none): the k-th smallest
    of n paired ratios is a one-sided (1 - alpha) lower bound of their median."""
    k = 0
    cdf = 0.0
    for i in range(n + 1):
        cdf += math.comb(n, i) / 2.0 ** n
        if cdf <= alpha:
            k = i + 1
        else:
            break
    return k


def significance(torch_times, tuned_times, min_gain=0.01):
    """The significance rule on paired samples: dict with speedup (median of torch_i / tuned_i),
    lower_bound, pairs and significant."""
    ratios = sorted(t / u for t, u in zip(torch_times, tuned_times) if u > 0)
    n = len(ratios)
    if n == 0:
        return {"speedup": 0.0, "lower_bound": 0.0, "pairs": 0, "significant": False}
    median = ratios[n // 2] if n % 2 else 0.5 * (ratios[n // 2 - 1] + ratios[n // 2])
    if n >= 5:
        k = sign_test_k(n)
        lower = ratios[k - 1] if k > 0 else ratios[0]
        significant = k > 0 and lower > 1.0 and median >= 1.0 + min_gain
    else:
        lower = median
        significant = median >= 1.0 + min_gain
    return {"speedup": median, "lower_bound": lower, "pairs": n, "significant": significant}


def _time_block(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def compare_with_torch(fn, m, n, k, bias, pairs=9, min_gain=0.01, block_seconds=0.005, seed=0):
    """Times torch's ``linear`` and the kernel ``fn`` on one shape, interleaved (torch, tuned,
    torch, tuned, ...; the first of each pair alternates), ``pairs`` blocks each, after checking
    that the kernel's output equals torch's (float32 tolerance scaled by sqrt(K)). Returns the
    significance dict plus ``torch_us``, ``tuned_us`` (medians) and ``max_abs_error``."""
    ensure_registered()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen)
    w = torch.randn(n, k, generator=gen)
    b = torch.randn(n, generator=gen) if bias else None
    ref = torch.nn.functional.linear(x.double(), w.double(), b.double() if b is not None else None)
    key = (int(m), int(n), int(k), bool(bias))
    with _lock:
        previous = _kernels.get(key)
        _kernels[key] = (fn, (ctypes.c_long * 3)(int(m), int(n), int(k)))
    try:
        with torch.no_grad():
            out = torch.ops.portkit.linear_forward(x, w, b)
            err = float((out.double() - ref).abs().max())
            scale = float(ref.abs().max()) or 1.0
            if not math.isfinite(err) or err > 2e-5 * math.sqrt(k) * max(1.0, scale):
                return {"speedup": 0.0, "lower_bound": 0.0, "pairs": 0, "significant": False,
                        "torch_us": 0.0, "tuned_us": 0.0, "max_abs_error": err, "wrong_result": True}

            def run_torch():
                torch.nn.functional.linear(x, w, b)

            def run_tuned():
                torch.ops.portkit.linear_forward(x, w, b)

            per = max(_time_block(run_torch, 3), _time_block(run_tuned, 3), 1e-7)
            calls = max(1, int(block_seconds / per))
            torch_t, tuned_t = [], []
            for i in range(pairs):
                if i % 2 == 0:
                    torch_t.append(_time_block(run_torch, calls))
                    tuned_t.append(_time_block(run_tuned, calls))
                else:
                    tuned_t.append(_time_block(run_tuned, calls))
                    torch_t.append(_time_block(run_torch, calls))
    finally:
        with _lock:
            if previous is None:
                _kernels.pop(key, None)
            else:
                _kernels[key] = previous
    result = significance(torch_t, tuned_t, min_gain)
    result["torch_us"] = sorted(torch_t)[len(torch_t) // 2] * 1e6
    result["tuned_us"] = sorted(tuned_t)[len(tuned_t) // 2] * 1e6
    result["max_abs_error"] = err
    result["wrong_result"] = False
    return result


def route_if_faster(fn, m, n, k, bias, **options):
    """Registers ``fn`` for the shape only when :func:`compare_with_torch` finds it significantly
    faster than torch's own op; returns the comparison (``routed`` says what was decided)."""
    result = compare_with_torch(fn, m, n, k, bias, **options)
    result["routed"] = bool(result["significant"])
    if result["routed"]:
        register(fn, m, n, k, bias)
    return result


class TunedLinear(torch.nn.Module):
    """Drop-in for ``torch.nn.Linear`` that calls ``torch.ops.portkit.linear`` (scriptable)."""

    def __init__(self, linear):
        super().__init__()
        ensure_registered()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x):
        return torch.ops.portkit.linear(x, self.weight, self.bias)


def replace_linears(module):
    """Replaces every ``torch.nn.Linear`` in ``module`` (in place) by :class:`TunedLinear`; returns
    the number replaced. Shapes without a routed kernel keep running torch's linear."""
    count = 0
    for name, child in list(module.named_children()):
        if type(child) is torch.nn.Linear:
            setattr(module, name, TunedLinear(child))
            count += 1
        else:
            count += replace_linears(child)
    return count


# ----------------------------------------------------------------------------- models

def linear_shapes(model, inputs):
    """(m, n, k, has_bias) of every ``torch.nn.Linear`` call in one forward of ``model`` on
    ``inputs``, distinct, in call order (m: the rows of the flattened input)."""
    shapes = []

    def hook(mod, args, out):
        x = args[0]
        k = int(mod.in_features)
        key = (int(x.numel() // k) if k else 0, int(mod.out_features), k, mod.bias is not None)
        if key not in shapes:
            shapes.append(key)

    hooks = [m.register_forward_hook(hook) for m in model.modules() if type(m) is torch.nn.Linear]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return shapes


def tune_kernels(shapes, bank, portkit, workdir, max_evals=None, say=None, timeout=3600, lookup_only=False,
                 known_unsatisfied=None):
    """Tunes a GEMM kernel for every shape with ``portkit tune --job-type=2`` into ``bank`` (its
    entries are reused: a second run only looks them up), loads each operator's kernel from the
    bank's cache and routes it only when it beats torch's ``linear`` significantly. Returns one
    record per shape: m, n, k, bias, config, so, routed, speedup, lower_bound, torch_us, tuned_us
    (or reason when there is no kernel). ``known_unsatisfied(record)``: a reason when an earlier
    run found that kernel no faster than torch's linear under the same conditions (the shape is
    then not timed again and stays on torch's op), else None."""
    import json
    import subprocess

    say = say or (lambda msg: None)
    if not shapes:
        return []
    bank = os.path.abspath(bank)  # the artifact records kernel paths: they must not depend on the cwd
    os.makedirs(workdir, exist_ok=True)
    ops = [{"op_name": "linear_%d" % i, "op_type": "MatMul", "inputs": [[m, k], [k, n]], "attrs": {"bias": bool(b)},
            "dtype": "float32", "count": 1} for i, (m, n, k, b) in enumerate(shapes)]
    ops_path = os.path.join(workdir, "opat_ops.json")
    with open(ops_path, "w", encoding="utf-8") as f:
        json.dump({"name": "opat", "ops": ops}, f, indent=1)
    out = os.path.join(workdir, "opat")
    cmd = [portkit, "tune", "--job-type=2", "--model", ops_path, "--tune-bank", bank, "--output", out]
    if max_evals:
        cmd += ["--max-evals", str(int(max_evals))]
    if lookup_only:
        cmd.append("--lookup-only")
    say("opat: tuning %d Linear shape(s) with %s" % (len(shapes), " ".join(cmd[1:3])))
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        raise KernelError("portkit tune --job-type=2 failed (exit %d): %s" % (res.returncode, " | ".join(tail)))
    with open(os.path.join(out, "tuned_plan.json"), encoding="utf-8") as f:
        plan = json.load(f)
    by_name = {op["op_name"]: op for op in plan.get("ops", [])}
    records = []
    for i, (m, n, k, b) in enumerate(shapes):
        rec = {"m": m, "n": n, "k": k, "bias": bool(b), "routed": False}
        op = by_name.get("linear_%d" % i)
        if op is None:
            rec["reason"] = "not tuned by portkit tune"
            records.append(rec)
            continue
        rec["config"] = op["strategy"]
        so = find_kernel(bank, op["strategy"])
        if so is None:
            rec["reason"] = "its kernel is not in the bank's cache (%s)" % os.path.join(bank, "kernels")
            records.append(rec)
            continue
        rec["so"] = so
        known = known_unsatisfied(rec) if known_unsatisfied else None
        if known:
            rec.update(reason=known, unsatisfied="bank")
            say("opat: linear %dx%dx%d%s: %s" % (m, k, n, " +bias" if b else "", known))
            records.append(rec)
            continue
        try:
            cmp = route_if_faster(load_kernel(so), m, n, k, b)
        except KernelError as e:
            rec["reason"] = str(e)
            records.append(rec)
            continue
        rec.update({key: cmp[key] for key in ("routed", "speedup", "lower_bound", "pairs", "torch_us", "tuned_us",
                                              "wrong_result")})
        say("opat: linear %dx%dx%d%s: tuned %.1f us vs torch %.1f us (x%.2f, lower bound %.2f): %s"
            % (m, k, n, " +bias" if b else "", cmp["tuned_us"], cmp["torch_us"], cmp["speedup"], cmp["lower_bound"],
               "routed" if cmp["routed"] else "torch's linear kept"))
        records.append(rec)
    return records


def register_records(records):
    """Registers the routed kernels of ``tune_kernels`` records (their kernels in the bank; an
    artifact's own copies are registered by ``portkit.tune.sgat.register_kernels``)."""
    ensure_registered()
    for rec in records:
        if rec.get("routed") and rec.get("so"):
            register(load_kernel(rec["so"]), rec["m"], rec["n"], rec["k"], rec["bias"])
