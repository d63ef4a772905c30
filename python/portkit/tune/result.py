"""AOE's SGAT result file, ``aoe_result_sgat_{YYYYmmddHHMMSS}_pid{pid}.json``, rewritten
atomically after every subgraph so that it always reads whole while tuning proceeds."""
import json
import os
import time


def result_file_name(when=None, pid=None):
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(when if when is not None else time.time()))
    return "aoe_result_sgat_%s_pid%d.json" % (stamp, os.getpid() if pid is None else pid)


def write_atomic(path, data):
    """``data`` (str: UTF-8 text; bytes: as they are) into ``path`` through a temporary file
    beside it and a rename: a reader never sees a half-written file."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    with (open(tmp, "wb") if isinstance(data, bytes) else open(tmp, "w", encoding="utf-8")) as f:
        f.write(data)
    os.replace(tmp, path)


def _pct(before, after):
    if not before or before <= 0 or after is None:
        return "0.00%"
    return "%.2f%%" % (100.0 * (before - after) / before)


class ResultFile:
    """Accumulates the subgraph outcomes and the model figures; ``write()`` after each change."""

    def __init__(self, path, tuning_name):
        self.path = path
        self.tuning_name = tuning_name
        self.start = time.time()
        self.subgraphs = []  # dicts: name, hash, strategy, repo (add/hit/...), before_us, after_us
        self.baseline = None  # Timing
        self.result = None
        self.status = "tuning in progress"
        self.extra = {}

    def summary(self):
        c = {k: 0 for k in ("add", "hit", "reserved", "update", "unsatisfied")}
        for s in self.subgraphs:
            for k in s["repo"]:
                c[k] += 1
        return {"repo_add_num": c["add"], "repo_hit_num": c["hit"], "repo_reserved_num": c["reserved"],
                "repo_unsatisfied_num": c["unsatisfied"], "repo_update_num": c["update"],
                "total_num": c["add"] + c["hit"] + c["unsatisfied"]}

    def document(self):
        def entry(s):
            return {"subgraph_name": s["name"], "subgraph_hash": s["hash"][:16], "strategy": s["strategy"],
                    "performance_before_tune(us)": round(s["before_us"], 3) if s["before_us"] else None,
                    "performance_after_tune(us)": round(s["after_us"], 3) if s["after_us"] else None,
                    "performance_improvement": _pct(s["before_us"], s["after_us"])}

        sg = {"sgat_tuning_result": self.status}
        if self.baseline is not None and self.result is not None:
            b, r = self.baseline, self.result
            sg.update({
                "model_baseline_performance(ms)": round(b.median * 1e3, 4),
                "model_baseline_ci95(ms)": [round(b.ci[0] * 1e3, 4), round(b.ci[1] * 1e3, 4)],
                "model_result_performance(ms)": round(r.median * 1e3, 4),
                "model_result_ci95(ms)": [round(r.ci[0] * 1e3, 4), round(r.ci[1] * 1e3, 4)],
                "model_performance_improvement": _pct(b.median, r.median),
            })
        sg["repo_modified_subgraphs"] = {
            "add_repo_subgraphs": [entry(s) for s in self.subgraphs if "add" in s["repo"]],
            "update_repo_subgraphs": [entry(s) for s in self.subgraphs if "update" in s["repo"]],
        }
        sg["subgraphs"] = [dict(entry(s), repo=s["repo"]) for s in self.subgraphs]
        sg["repo_summary"] = self.summary()
        sg.update(self.extra)
        return {"basic": {"tuning_name": self.tuning_name, "tuning_time(s)": round(time.time() - self.start, 3)},
                "SGAT": sg}

    def write(self):
        if self.path:
            write_atomic(self.path, json.dumps(self.document(), indent=2, sort_keys=False) + "\n")
