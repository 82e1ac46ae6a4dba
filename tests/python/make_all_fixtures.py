"""Writes every fixture the C++ tests compare against: make_all_fixtures.py OUTDIR runs each
make_NAME.py generator into OUTDIR/NAME. The generators are independent of the C++ code and of each
other; they run side by side, one per core, each in a process forked from this one after torch and
numpy are imported here once (the import was about a third of a generator's time). Every generator
runs even when another fails; the exit status is 1 if any did."""

import glob
import multiprocessing
import os
import runpy
import sys
import time
import traceback

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy  # noqa: F401  (imported once, inherited by every generator)
import torch  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))


def run_generator(job):
    """Runs one generator as its own `python3 make_NAME.py OUTDIR` would; returns (name, status, seconds)."""
    script, out = job
    name = os.path.basename(script)[: -len(".py")]
    start = time.time()
    os.makedirs(out, exist_ok=True)
    sys.argv = [script, out]
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001  (reported, and counted as a failure)
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return name, status, time.time() - start


def main(argv):
    if len(argv) != 2:
        print("usage: make_all_fixtures.py OUTDIR", file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    jobs = []
    for script in sorted(glob.glob(os.path.join(HERE, "make_*.py"))):
        if os.path.basename(script) == os.path.basename(__file__):
            continue
        name = os.path.basename(script)[len("make_") : -len(".py")]
        jobs.append((script, os.path.join(out, name)))
    # A new process per generator (maxtasksperchild=1): each starts from this one's imports alone,
    # as a fresh interpreter would, and no generator sees another's globals or torch settings.
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1, maxtasksperchild=1) as pool:
        results = pool.map(run_generator, jobs, chunksize=1)
    failed = [name for name, status, _ in results if status != 0]
    for name, status, seconds in results:
        print(f"make_all_fixtures: {name} {'failed' if status else 'done'} in {seconds:.1f} s")
    if failed:
        print(f"make_all_fixtures: {', '.join(failed)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
