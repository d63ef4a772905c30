"""Records, per call site of a torch operation inside the user's code, the shapes of its tensor
inputs and outputs at each iteration of the wrapped data loop, and reports the sites whose shapes
change from one iteration to the next.

Capture goes through torch's own interception (a TorchFunctionMode, torch >= 1.13), so the user's
code is not rewritten call by call. Results are not changed: every op runs exactly as called.
"""
import atexit
import csv
import io
import os
import signal
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode

REPORT_NAME = "msft_dynamic_shape_analysis_report.csv"
# Host-side data-pipeline ops (fetching a batch: Dataset.__getitem__, collate_fn, the loader's
# iterator) are reported apart: they do not run on the device in the training loop.
PIPELINE_REPORT_NAME = "msft_dynamic_shape_data_pipeline.csv"
_PIPELINE_FUNCTIONS = frozenset(["__getitem__", "__getitems__", "__iter__", "__next__", "collate_fn"])
HEADER = ["Function Name", "File Path", "Line Number", "Call Stack",
          "Input Shape Range", "Output Shape Range"]
_SKIP = {"__get__", "__set__", "dim", "size", "numel", "is_floating_point", "is_complex",
         "__len__", "__format__", "__repr__", "element_size", "stride", "data_ptr"}
_STACK_DEPTH = 5


def _load_config():
    here = os.path.dirname(os.path.abspath(__file__))
    config = {"copy_root": os.path.dirname(here), "display_root": "", "report_dir": None}
    try:
        from . import _config  # written by portkit analyse -m dynamic_shape
        config["display_root"] = getattr(_config, "DISPLAY_ROOT", "")
    except ImportError:
        pass
    config["report_dir"] = os.environ.get("MSFT_DYNAMIC_SHAPE_REPORT_DIR") or config["copy_root"]
    return config


def _shapes(value, out, depth=0):
    """Appends the shapes of the tensors in value (a tensor, or nested lists/tuples/dicts)."""
    if isinstance(value, torch.Tensor):
        out.append(tuple(value.shape))
    elif depth < 3 and isinstance(value, (list, tuple)):
        for item in value:
            _shapes(item, out, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            _shapes(item, out, depth + 1)
    return out


class _Range:
    """Min/max per dimension of the shapes seen at one tensor position."""
    __slots__ = ("rank", "lo", "hi", "rank_varies")

    def __init__(self, shape):
        self.rank = len(shape)
        self.lo = list(shape)
        self.hi = list(shape)
        self.rank_varies = False

    def add(self, shape):
        """Returns True when the range grew."""
        grew = False
        if len(shape) != self.rank and not self.rank_varies:
            self.rank_varies = grew = True
        for i, d in enumerate(shape[:self.rank]):
            if d < self.lo[i]:
                self.lo[i] = d
                grew = True
            if d > self.hi[i]:
                self.hi[i] = d
                grew = True
        return grew

    def text(self):
        dims = ", ".join("%d" % lo if lo == hi else "%d-%d" % (lo, hi)
                         for lo, hi in zip(self.lo, self.hi))
        return "(" + dims + (",)" if self.rank == 1 else ")") + (" rank varies" if self.rank_varies else "")


def _ranges_text(ranges):
    return "[" + ", ".join(r.text() for r in ranges) + "]"


class _Site:
    __slots__ = ("name", "file", "line", "stack", "first", "changed", "inputs", "outputs", "pipeline")

    def __init__(self, name, file, line, stack):
        self.name, self.file, self.line, self.stack = name, file, line, stack
        self.first = []      # per call ordinal within an iteration: (input shapes, output shapes)
        self.changed = False
        self.inputs = []     # _Range per input tensor position (all calls)
        self.outputs = []
        self.pipeline = False  # a data-pipeline op (reported in PIPELINE_REPORT_NAME)

    def record(self, ordinal, ins, outs):
        """Returns True when what the report shows for this site changed."""
        was_changed = self.changed
        if ordinal < len(self.first):
            if self.first[ordinal] != (ins, outs):
                self.changed = True
        else:
            self.first.append((ins, outs))
        grew = False
        for ranges, shapes in ((self.inputs, ins), (self.outputs, outs)):
            for i, shape in enumerate(shapes):
                if i < len(ranges):
                    grew |= ranges[i].add(shape)
                else:
                    ranges.append(_Range(shape))
                    grew = True
        return self.changed and (grew or not was_changed)


class _Mode(TorchFunctionMode):
    def __init__(self, detector):
        super().__init__()
        self.detector = detector

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        det = self.detector
        if det._busy.flag:
            return result
        name = getattr(func, "__name__", None) or str(func)
        if name in _SKIP:
            return result
        det._busy.flag = True
        try:
            det._record(name, args, kwargs, result)
        finally:
            det._busy.flag = False
        return result


class DynamicShapeDetector:
    """Wrap the training data loop with start(); everything else is automatic."""

    def __init__(self, config=None):
        self._config = config or _load_config()
        self._copy_root = os.path.abspath(self._config["copy_root"]) + os.sep
        self._package_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
        self._sites = {}
        self._files = {}
        self._ordinals = {}
        self._mode = None
        self._active = 0
        self._dirty = False
        self._lock = threading.Lock()
        self._busy = threading.local()
        self._busy.flag = False
        self._iterations = 0
        self._installed = False
        self._fetching = False
        self._pid = os.getpid()  # loader worker processes (forks) record nothing

    # -- public -------------------------------------------------------------------------------
    def start(self, iterable):
        """Yields the items of `iterable`; shapes are recorded while the loop body runs."""
        self._install_exit_hooks()
        self._enter()
        try:
            it = iter(iterable)
            while True:
                # Ops run while the next batch is fetched belong to the data pipeline.
                self._fetching = True
                try:
                    item = next(it)
                except StopIteration:
                    break
                finally:
                    self._fetching = False
                self._begin_iteration()
                yield item
                self._end_iteration()
        finally:
            self._exit()
            self.write_report()

    def report_path(self):
        return os.path.join(self._config["report_dir"], REPORT_NAME)

    def pipeline_report_path(self):
        return os.path.join(self._config["report_dir"], PIPELINE_REPORT_NAME)

    def write_report(self):
        """Writes the two CSVs (training loop, data pipeline) atomically (temporary file, then
        rename)."""
        with self._lock:
            rows = {False: [], True: []}
            for site in self._sites.values():
                if site.changed:
                    rows[site.pipeline].append([site.name, site.file, site.line, site.stack,
                                                _ranges_text(site.inputs), _ranges_text(site.outputs)])
            self._dirty = False
        self._write_csv(self.report_path(), rows[False])
        self._write_csv(self.pipeline_report_path(), rows[True])

    def _write_csv(self, path, rows):
        rows.sort(key=lambda r: (r[1], r[2], r[0]))
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(HEADER)
        for row in rows:
            writer.writerow([_neutralise(str(c)) for c in row])
        tmp = "%s.tmp.%d" % (path, os.getpid())
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            sys.stderr.write("msft_dynamic_analysis: cannot write %s: %s\n" % (path, e))

    # -- internals ----------------------------------------------------------------------------
    def _enter(self):
        if self._active == 0:
            self._mode = _Mode(self)
            self._mode.__enter__()
        self._active += 1

    def _exit(self):
        self._active -= 1
        if self._active == 0 and self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    def _begin_iteration(self):
        self._ordinals.clear()

    def _end_iteration(self):
        self._iterations += 1
        if self._dirty:
            self.write_report()  # a crash loses at most the iteration in flight

    def _user_file(self, code):
        """The absolute path of code's file when it belongs to the user's project, else None."""
        known = self._files.get(code.co_filename, False)
        if known is False:
            path = os.path.abspath(code.co_filename)  # the main script's name may be relative
            known = path if path.startswith(self._copy_root) and not path.startswith(self._package_dir) else None
            self._files[code.co_filename] = known
        return known

    def _user_frames(self):
        frame = sys._getframe(3)
        frames = []
        while frame is not None and len(frames) < _STACK_DEPTH:
            path = self._user_file(frame.f_code)
            if path is not None:
                frames.append((path, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        return frames

    def _display(self, filename):
        rel = filename[len(self._copy_root):].replace(os.sep, "/")
        root = self._config.get("display_root") or ""
        return root + "/" + rel if root else rel

    def _record(self, name, args, kwargs, result):
        # Only the training process's main thread (not loader workers or pin-memory threads).
        if os.getpid() != self._pid or threading.current_thread() is not threading.main_thread():
            return
        frames = self._user_frames()
        if not frames:
            return
        pipeline = self._fetching or any(func in _PIPELINE_FUNCTIONS for _, _, func in frames)
        top_file, top_line, _ = frames[0]
        key = (name, top_file, top_line)
        ins = _shapes(args, [])
        _shapes(kwargs, ins)
        outs = _shapes(result, [])
        if not ins and not outs:
            return
        ins, outs = tuple(ins), tuple(outs)
        with self._lock:
            site = self._sites.get(key)
            if site is None:
                stack = " <- ".join("%s:%d(%s)" % (self._display(path), line, func)
                                    for path, line, func in frames)
                site = _Site(name, self._display(top_file), top_line, stack)
                site.pipeline = pipeline
                self._sites[key] = site
            ordinal = self._ordinals.get(key, 0)
            self._ordinals[key] = ordinal + 1
            if site.record(ordinal, ins, outs):
                self._dirty = True

    def _install_exit_hooks(self):
        if self._installed:
            return
        self._installed = True
        atexit.register(self.write_report)
        for sig in (signal.SIGTERM,):
            try:
                previous = signal.getsignal(sig)
                signal.signal(sig, self._make_handler(sig, previous))
            except (ValueError, OSError):  # not the main thread
                pass

    def _make_handler(self, sig, previous):
        def handler(signum, frame):
            self.write_report()
            if callable(previous) and previous not in (signal.SIG_IGN, signal.SIG_DFL):
                previous(signum, frame)
                return
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        return handler


def _neutralise(cell):
    if cell and cell[0] in "=+-@%\t\r":
        return "'" + cell
    return cell


DETECTOR = DynamicShapeDetector()
