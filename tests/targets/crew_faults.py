#!/usr/bin/python3
"""Test double for crews (adapters/torch/crew.py): the torch adapter's warm worker, with faults
planted by the config's seed in rank 1: 901 raises, 902 kills itself with SIGSEGV, 903 exits with
code 4; any other seed trains as adapters/torch/adapter.py does. A crew of world 3 fails to form
its group (RuntimeError in init_process_group). Each rank prints its pid to the run's log.
Usage: crew_faults.py (serves run dirs, protocol 2)."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import adapter  # noqa: E402
import crew  # noqa: E402
import serve  # noqa: E402


def init_process_group(*args, **kwargs):
    if kwargs.get("world_size") == 3:
        raise RuntimeError("planted formation fault")
    return form_group(*args, **kwargs)


form_group, adapter.dist.init_process_group = adapter.dist.init_process_group, init_process_group


def faulty(rank, world, run_dir, plant):
    seed = json.load(open(os.path.join(run_dir, "config.json")))["seed"]
    if rank == 1 and seed == 901:
        raise RuntimeError("planted crew fault")
    if rank == 1 and seed == 902:
        os.kill(os.getpid(), signal.SIGSEGV)
    if rank == 1 and seed == 903:
        sys.exit(4)
    # One write per line: two ranks share the log, and print() writes the newline separately.
    sys.stdout.write("crew rank %d pid %d\n" % (rank, os.getpid()))
    sys.stdout.flush()
    adapter.train(rank, world, run_dir, plant)


serve.serve(crews=crew.Crews(faulty, ("",)))
