"""Runs a Python program under the PyTorch profiler without changing its code (`portkit prof collect`).

    python -m portkit.prof_launch SCRIPT.py [ARGS...]
    python -m portkit.prof_launch -m MODULE [ARGS...]

Settings come from the environment (set by `portkit prof collect`):
PORTKIT_PROF_OUT (folder for the trace), PORTKIT_PROF_STEPS (window of steps; 0 = whole run),
PORTKIT_PROF_RECORD_SHAPES, PORTKIT_PROF_WITH_STACK ("1" to enable).

Steps: every `optimizer.step()` ends a step. Each step is wrapped in a `ProfilerStep#N` range.
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

import torch
import torch.profiler as tp


class _Collector:
    def __init__(self):
        self.out = os.environ.get("PORTKIT_PROF_OUT") or os.getcwd()
        self.window = int(os.environ.get("PORTKIT_PROF_STEPS", "0") or 0)
        self.shapes = os.environ.get("PORTKIT_PROF_RECORD_SHAPES") == "1"
        self.stack = os.environ.get("PORTKIT_PROF_WITH_STACK") == "1"
        self.step = 0
        self.profiler = None
        self.range = None
        self.done = False

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
            self.finish()
            return
        self._open_range()

    def finish(self):
        if self.done or self.profiler is None:
            return
        self.done = True
        self._close_range()
        self.profiler.__exit__(None, None, None)
        os.makedirs(self.out, exist_ok=True)
        name = "trace_%d%s" % (os.getpid(), ".pt.trace.json" if torch.autograd.kineto_available() else ".json")
        path = os.path.join(self.out, name)
        self.profiler.export_chrome_trace(path)
        # Drop the profiler now: torch 1.13 aborts if its objects outlive pybind11 at shutdown.
        self.profiler = None
        gc.collect()
        if self.window > 0 and self.step >= 1:
            _cut_before_first_step(path)
        sys.stderr.write("portkit prof: trace written to %s (%d steps marked)\n" % (path, self.step))


def _cut_before_first_step(path):
    """Keeps the events from the start of ProfilerStep#1 on (metadata always)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    starts = [float(e["ts"]) for e in events if e.get("name") == "ProfilerStep#1" and "ts" in e]
    if not starts:
        return
    cut = min(starts)
    kept = [e for e in events if e.get("ph") == "M" or "ts" not in e or float(e["ts"]) >= cut]
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


def main(argv):
    if not argv:
        sys.stderr.write("usage: python -m portkit.prof_launch SCRIPT.py [ARGS...] | -m MODULE [ARGS...]\n")
        return 2
    collector = _Collector()
    collector.begin()
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write("portkit prof: -m needs a module name\n")
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
