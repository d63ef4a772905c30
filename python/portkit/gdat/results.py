"""GDAT's output files: the AOE-like result file ``aoe_result_gdat_{timestamp}_pid{pid}.json``,
rewritten after every trial so that it reflects the tuning as it proceeds, and
``gdat_settings.json``, the DDP settings to apply. Both are written to a temporary name in the
output folder and renamed, so a reader never sees half a file."""
import json
import os
import tempfile
import time

SETTINGS_FILE = "gdat_settings.json"


def write_json_atomic(path, doc):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def result_file_name(when=None, pid=None):
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() if when is None else when))
    return "aoe_result_gdat_%s_pid%d.json" % (stamp, os.getpid() if pid is None else pid)


def improvement(baseline_ms, result_ms):
    if not baseline_ms or baseline_ms <= 0:
        return "0.00%"
    return "%.2f%%" % (100.0 * (baseline_ms - result_ms) / baseline_ms)


class ResultWriter(object):
    """Keeps the trials of one run and rewrites the result file after each."""

    def __init__(self, output_dir, tuning_name, mode, info, start=None):
        self.path = os.path.join(output_dir, result_file_name(start))
        self.output_dir = output_dir
        self.tuning_name = tuning_name
        self.mode = mode
        self.info = dict(info)
        self.start = time.time() if start is None else start
        self.trials = []

    def add_trial(self, settings, time_ms, extra=None):
        t = {"trial": len(self.trials), "settings": settings.to_dict(), "label": settings.label(),
             "step_time(ms)": round(time_ms, 6)}
        if extra:
            t.update(extra)
        self.trials.append(t)
        self.write(status="in progress")

    def write(self, status, baseline_ms=None, best=None, best_ms=None, verdict=None):
        gdat = {"mode": self.mode, "gdat_tuning_result": verdict or status, "trials": self.trials,
                "trial_count": len(self.trials)}
        gdat.update(self.info)
        if baseline_ms is not None:
            gdat["model_baseline_performance(ms)"] = round(baseline_ms, 6)
        if best is not None:
            gdat["model_result_performance(ms)"] = round(best_ms, 6)
            gdat["model_performance_improvement"] = improvement(baseline_ms, best_ms)
            gdat["best_settings"] = best.to_dict()
        doc = {"basic": {"tuning_name": self.tuning_name,
                         "tuning_time(s)": round(time.time() - self.start, 3), "status": status},
               "GDAT": gdat}
        write_json_atomic(self.path, doc)


def settings_document(settings, baseline_ms, best_ms, mode, verdict, powersgd_start_iter=None):
    """The content of gdat_settings.json: the chosen point, and how to apply it."""
    doc = {"gdat_settings": 1, "mode": mode, "verdict": verdict, "settings": settings.to_dict(),
           "lossy": settings.lossy,
           "ddp_kwargs": {"bucket_cap_mb": settings.bucket_cap_mb,
                          "gradient_as_bucket_view": settings.gradient_as_bucket_view,
                          "static_graph": settings.static_graph},
           "first_bucket_bytes": int(settings.first_bucket_mb * 1024 * 1024),
           "comm_hook": settings.comm_hook,
           "apply": "from portkit.gdat import load_settings, make_ddp; "
                    "ddp = make_ddp(model, load_settings('gdat_settings.json'))",
           "baseline_step_time(ms)": round(baseline_ms, 6), "step_time(ms)": round(best_ms, 6),
           "improvement": improvement(baseline_ms, best_ms)}
    if settings.comm_hook == "powersgd":
        doc["powersgd"] = {"matrix_approximation_rank": settings.powersgd_rank,
                           "start_powerSGD_iter": powersgd_start_iter}
    return doc
