"""Runs a Python program under the PyTorch profiler without changing its code (`portkit prof collect`).

    python -m portkit.prof_launch SCRIPT.py [ARGS...]
    python -m portkit.prof_launch -m MODULE [ARGS...]
    python -m portkit.prof_launch -c CODE [ARGS...]

Settings come from the environment (set by `portkit prof collect`):
PORTKIT_PROF_OUT (folder for the trace), PORTKIT_PROF_STEPS (window of steps; 0 = whole run),
PORTKIT_PROF_RECORD_SHAPES, PORTKIT_PROF_WITH_STACK ("1" to enable).

Steps: every `optimizer.step()` ends a step. Each step is wrapped in a `ProfilerStep#N` range; the
part after the last optimizer step is a tail, not a step, and is left out of the step ranges.
Several processes: under torchrun (which `portkit prof collect -- torchrun ...` runs with this
launcher in every worker) each worker writes `trace_rank<RANK>_<pid>...`; functions started with
`torch.multiprocessing.spawn` are profiled in each worker (`rank<i>`) and the parent writes no trace
when it made no step itself.
With a window of N steps, profiling stops after step N and the written trace keeps only what
happened from step 1 on (step 0 is the warm-up); a program that never steps is profiled whole.
(The window is cut from the trace rather than by restarting the profiler: torch 1.13 aborts at exit
when a profiler recording shapes is restarted.) The trace is written at exit, also after an
exception, as Kineto JSON (torch 2.x) or the legacy profiler's JSON (torch builds without Kineto,
such as Debian's 1.13).
"""
import atexit
import gc
import json
import os
import runpy
import sys

USAGE = ("usage: python -m portkit.prof_launch SCRIPT.py [ARGS...] | -m MODULE [ARGS...] | -c CODE [ARGS...]\n"
         "Runs the program under the PyTorch profiler; the trace goes to $PORTKIT_PROF_OUT (default: the\n"
         "current folder). Normally started by `portkit prof collect --output DIR -- python ...`.\n")

# Imported on first use (_load_torch), so that --help and usage errors need no torch.
torch = None
tp = None


def _load_torch():
    global torch, tp
    if torch is None:
        import torch as torch_module
        import torch.profiler as profiler_module

        torch, tp = torch_module, profiler_module


class _Collector:
    def __init__(self):
        _load_torch()
        self.out = os.environ.get("PORTKIT_PROF_OUT") or os.getcwd()
        self.window = int(os.environ.get("PORTKIT_PROF_STEPS", "0") or 0)
        self.shapes = os.environ.get("PORTKIT_PROF_RECORD_SHAPES") == "1"
        self.stack = os.environ.get("PORTKIT_PROF_WITH_STACK") == "1"
        self.step = 0
        self.profiler = None
        self.range = None
        self.done = False
        self.spawned = 0            # workers started through mp.spawn (each profiled itself)
        self.window_closed = False  # the window ended at a step boundary: no tail range is open

    def _start(self):
        activities = [tp.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(tp.ProfilerActivity.CUDA)
        self.profiler = tp.profile(activities=activities, record_shapes=self.shapes, with_stack=self.stack)
        self.profiler.__enter__()

    def _open_range(self):
        self.range = torch.autograd.profiler.record_function("ProfilerStep#%d" % self.step)
        self.range.__enter__()

    def _close_range(self):
        if self.range is not None:
            self.range.__exit__(None, None, None)
            self.range = None

    def begin(self):
        self._start()
        self._open_range()
        original = torch.optim.Optimizer.step

        collector = self

        def step(opt, *args, **kwargs):
            result = original(opt, *args, **kwargs)
            collector.on_step()
            return result

        import importlib
        hooks = getattr(importlib.import_module("torch.optim.optimizer"), "register_optimizer_step_post_hook", None)
        if hooks is not None:  # torch >= 2.0: a global post-step hook, also for later subclasses
            hooks(lambda *args, **kwargs: collector.on_step())
        else:
            # torch 1.x: every optimizer defines its own step(); wrap each known subclass.
            torch.optim.Optimizer.step = step
            for cls in _subclasses(torch.optim.Optimizer):
                if "step" in cls.__dict__:
                    cls.step = _wrap(cls.__dict__["step"], collector)
        atexit.register(self.finish)

    def on_step(self):
        if self.done:
            return
        self._close_range()
        self.step += 1
        if self.window > 0 and self.step > self.window:
            self.window_closed = True
            self.finish()
            return
        self._open_range()

    def finish(self):
        if self.done or self.profiler is None:
            return
        self.done = True
        self._close_range()
        self.profiler.__exit__(None, None, None)
        if self.spawned and self.step == 0:
            # A launcher parent (mp.spawn) whose workers were profiled: its own trace holds no step.
            self.profiler = None
            gc.collect()
            sys.stderr.write("portkit prof: parent process not written (its %d spawned workers were profiled)\n"
                             % self.spawned)
            return
        os.makedirs(self.out, exist_ok=True)
        kineto = torch.autograd.kineto_available()
        rank = _rank()
        name = "trace_%s%d%s" % ("rank%d_" % rank if rank is not None else "", os.getpid(),
                                 ".pt.trace.json" if kineto else ".json")
        path = os.path.join(self.out, name)
        self.profiler.export_chrome_trace(path)
        # Drop the profiler now: torch 1.13 aborts if its objects outlive pybind11 at shutdown.
        self.profiler = None
        gc.collect()
        # Step 0 (before the first optimizer step) is the warm-up: cut when a window was asked.
        # The range opened after the last optimizer step is a tail, not a step: dropped.
        _rewrite(path, cut_warmup=self.window > 0 and self.step >= 1,
                 tail="ProfilerStep#%d" % self.step if self.step >= 1 and not self.window_closed else None)
        if self.shapes and not kineto:
            sys.stderr.write("portkit prof: warning: --record-shapes: this torch (%s, built without Kineto) "
                             "does not write input shapes into its trace; use torch 2.x for shapes\n"
                             % torch.__version__)
        sys.stderr.write("portkit prof: trace written to %s (%d steps marked)\n" % (path, self.step))


def _rank():
    """The process's rank under torchrun / torch.distributed.launch / mp.spawn, or None."""
    for var in ("PORTKIT_PROF_RANK", "RANK"):
        value = os.environ.get(var)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


class _ProfiledWorker:
    """mp.spawn's function wrapped so that each spawned worker runs under its own collector."""

    def __init__(self, fn, env):
        self.fn = fn
        self.env = env

    def __call__(self, index, *args):
        os.environ.update(self.env)
        if "RANK" not in os.environ:
            os.environ["PORTKIT_PROF_RANK"] = str(index)
        collector = _Collector()
        collector.begin()
        try:
            return self.fn(index, *args)
        finally:
            collector.finish()


def _patch_spawn(collector):
    """Profiles the workers of torch.multiprocessing.spawn / start_processes, not only the parent."""
    import torch.multiprocessing as mp

    env = {k: v for k, v in os.environ.items() if k.startswith("PORTKIT_PROF_")}
    # This file runs as __main__ (python -m portkit.prof_launch); the wrapper must pickle under its
    # importable name for the spawned interpreters.
    import importlib
    worker = importlib.import_module("portkit.prof_launch")._ProfiledWorker

    spawn_module = sys.modules.get("torch.multiprocessing.spawn")
    original = getattr(spawn_module, "start_processes", None) or getattr(mp, "start_processes", None)
    if original is None:
        return

    # mp.spawn calls start_processes: wrapping that one function catches both, once.
    def start_processes(fn, args=(), nprocs=1, *rest, **kwargs):
        if not isinstance(fn, worker):
            collector.spawned += nprocs
            fn = worker(fn, env)
        return original(fn, args, nprocs, *rest, **kwargs)

    mp.start_processes = start_processes
    if spawn_module is not None:
        spawn_module.start_processes = start_processes


def _rewrite(path, cut_warmup, tail):
    """Keeps the events from the start of ProfilerStep#1 on (metadata always) when `cut_warmup`;
    drops the step range named `tail` (the unfinished range after the last optimizer step)."""
    if not cut_warmup and tail is None:
        return
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    kept = events
    if tail is not None:
        kept = [e for e in kept if e.get("name") != tail]
    starts = [float(e["ts"]) for e in kept if e.get("name") == "ProfilerStep#1" and "ts" in e]
    if cut_warmup and starts:
        cut = min(starts)
        kept = [e for e in kept if e.get("ph") == "M" or "ts" not in e or float(e["ts"]) >= cut]
    if isinstance(data, dict):
        data["traceEvents"] = kept
    else:
        data = kept
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _subclasses(cls):
    seen, todo = [], list(cls.__subclasses__())
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.append(c)
            todo.extend(c.__subclasses__())
    return seen


def _wrap(fn, collector):
    if getattr(fn, "_portkit_wrapped", False):
        return fn

    def step(opt, *args, **kwargs):
        result = fn(opt, *args, **kwargs)
        collector.on_step()
        return result

    step._portkit_wrapped = True
    return step


def _usage_error(argv):
    """The message for a command line that names no program to run, or None when it does."""
    if not argv:
        return USAGE
    if argv[0] in ("-m", "-c") and len(argv) < 2:
        return "portkit prof: %s needs %s\n" % (argv[0], "a module name" if argv[0] == "-m" else "the code to run")
    if argv[0] not in ("-m", "-c") and not os.path.isfile(argv[0]):
        return "portkit prof: %s: no such file (give a Python script, -m MODULE or -c CODE)\n" % argv[0]
    return None


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    error = _usage_error(argv)
    if error:
        sys.stderr.write(error)
        return 2
    try:
        _load_torch()
    except ImportError as e:
        sys.stderr.write("portkit prof: this interpreter (%s) cannot import torch: %s\n" % (sys.executable, e))
        return 2
    collector = _Collector()
    collector.begin()
    _patch_spawn(collector)
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        # As `python -c CODE ARGS`: sys.argv[0] is "-c" and the current folder is first on the path.
        sys.argv = ["-c"] + argv[2:]
        sys.path.insert(0, "")
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
