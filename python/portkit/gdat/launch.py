"""Starts the ranks of a local process group: ``run_ranks(fn, nproc)`` forks ``nproc``
processes (the parent has imported torch but run no operator, so the children share the import
instead of paying it again), gives them MASTER_ADDR=127.0.0.1 and a free port, initialises the
process group and calls ``fn(rank, world_size)``. A rank that fails ends the others (they
would otherwise wait in a collective).

Exit codes of a rank: 0 done, 1 ``fn`` raised, 3 the process group could not start.
"""
import datetime
import importlib
import os
import socket
import sys
import time
import traceback

INIT_FAILED = 3


class LaunchError(RuntimeError):
    def __init__(self, message, init_failed=False):
        RuntimeError.__init__(self, message)
        self.init_failed = init_failed


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def _rank_main(rank, world, port, backend, fn, timeout_s, device_import=""):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)})
    try:
        import torch
        import torch.distributed as dist

        # As torchrun does: ranks sharing a machine split its cores instead of each starting a
        # thread per core (which oversubscribes the machine and makes every step wait on spinning
        # threads). OMP_NUM_THREADS, when set, wins.
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0
                              else max(1, (os.cpu_count() or 1) // world))
        if device_import:  # the module that registers the backend (a device plug-in)
            importlib.import_module(device_import)
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
    except Exception as e:  # the sandbox may forbid sockets; the caller reports it
        sys.stderr.write("gdat: rank %d: the %s process group could not start: %s\n" % (rank, backend, e))
        sys.stderr.flush()
        os._exit(INIT_FAILED)
    code = 0
    try:
        fn(rank, world)
    except BaseException:
        sys.stderr.write("gdat: rank %d failed:\n%s" % (rank, traceback.format_exc()))
        code = 1
    try:
        if code == 0:
            dist.destroy_process_group()
    except Exception:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _preload():
    # What DDP's constructor imports on torch 2.x (dynamo, functional collectives, device mesh:
    # seconds of imports). Imported once here, the forked ranks share it instead of each paying
    # it; importing runs no operator and starts no thread.
    import importlib

    for name in ("torch.nn.parallel", "torch.distributed.algorithms.ddp_comm_hooks.default_hooks",
                 "torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook", "torch._dynamo",
                 "torch.distributed._functional_collectives", "torch.distributed.device_mesh"):
        try:
            importlib.import_module(name)
        except Exception:
            pass


def run_ranks(fn, nproc, backend="gloo", timeout_s=600.0, start_method="fork", device_import=""):
    """Runs ``fn(rank, world_size)`` in ``nproc`` ranks; raises LaunchError if any rank fails
    (``init_failed`` True when the process group itself could not start)."""
    import multiprocessing

    if start_method == "fork":
        _preload()

    ctx = multiprocessing.get_context(start_method)
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, nproc, port, backend, fn, timeout_s, device_import)) for r in range(nproc)]
    for p in procs:
        p.start()
    deadline = time.time() + timeout_s + 30
    failed = None
    while True:
        codes = [p.exitcode for p in procs]
        if all(c is not None for c in codes):
            break
        bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if bad or time.time() > deadline:
            failed = bad or [(-1, "timeout")]
            time.sleep(0.5)  # let the others report their own error first
            for p in procs:
                if p.exitcode is None:
                    p.terminate()
            for p in procs:
                p.join(5)
            break
        time.sleep(0.05)
    codes = [p.exitcode for p in procs]
    if failed or any(c != 0 for c in codes):
        init_failed = any(c == INIT_FAILED for c in codes)
        what = "the %s process group could not start" % backend if init_failed else "a rank failed"
        raise LaunchError("gdat: %s (rank exit codes %s)" % (what, codes), init_failed=init_failed)
