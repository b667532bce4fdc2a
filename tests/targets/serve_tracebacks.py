#!/usr/bin/python3
"""Regression test of adapters/torch/serve.py: ranks that fail together leave a whole traceback
first in their shared log. Four ranks forked by serve.fork_ranks pass a barrier and raise at once,
from deep recursions (a traceback of some 400 lines each), an exception that derives from
BaseException, as torch.distributed.checkpoint's CheckpointException does. torch.multiprocessing
catches only an Exception; multiprocessing prints any other in each failing rank, line by line,
and the ranks' lines interleave. paradiff signs a crash by the first traceback in the log, its
exception and innermost frame (targets/crash_state.cpp): in the log, opened as a warm leader opens
it, the first traceback's frames must run unbroken to its exception line. Also: a SystemExit's
message reaches the log; and a rank whose Exception makes its peer's collective fail ("Connection
closed by peer") writes its own traceback to the log, whichever failed rank torch.multiprocessing
quotes (it quotes one, the first it notices: the peer, on a loaded machine). Exits 0 when all ROUNDS
rounds hold, 1 otherwise.
Usage: serve_tracebacks.py [ROUNDS=5]"""
import json
import multiprocessing
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import serve  # noqa: E402

WORLD, DEPTH = 4, 100


class Planted(BaseException):
    pass


def deep(rank, n):  # (two functions by turns: Python folds a run of identical frames into one line)
    if n == 0:
        raise Planted("planted in rank %d" % rank)
    deeper(rank, n - 1)


def deeper(rank, n):
    deep(rank, n)


def train(rank, world, run_dir, barrier):
    barrier.wait()
    deep(rank, DEPTH)


def lead(work, world, train, *args):
    """train(rank, world, run_dir, *args) on world ranks forked by serve.fork_ranks in a leader
    forked as serve._lead runs one, its output in the run's log: the leader's exit code and the
    log's lines."""
    run_dir = tempfile.mkdtemp(dir=work)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"world": world}, f)
    log = os.path.join(run_dir, "target.log")
    pid = os.fork()
    if pid == 0:
        serve.output_to(log, os.O_CREAT | os.O_TRUNC)
        os._exit(serve.run_for_code(serve.fork_ranks, train, run_dir, *args))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), open(log).read().splitlines()


def exception_line(lines, i):
    """The traceback that starts at lines[i]: the index of the line past its frames ("  File ..."
    and their source lines), and that line, its exception's ("(end of log)" past the end)."""
    j = i + 1
    while j < len(lines) and lines[j].startswith("  "):
        j += 1
    return j, lines[j] if j < len(lines) else "(end of log)"


def round_ok(work):
    code, lines = lead(work, WORLD, train, multiprocessing.get_context("fork").Barrier(WORLD))
    if code != 1:
        print("the leader exited with %r, not 1" % code)
        return False
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        print("no traceback in the log")
        return False
    i = starts[0]
    j, end = exception_line(lines, i)
    if not re.match(r"(__main__\.)?Planted: planted in rank \d$", end):
        print("the first traceback broken at log line %d: %r" % (j + 1, end))
        return False
    if j - i - 1 < 2 * DEPTH:
        print("a traceback of %d frame lines, fewer than the recursion's" % (j - i - 1))
        return False
    return True


def exit_message_ok(work):
    """A leader whose config raises SystemExit with a message exits 1 with the message in its log,
    as Python prints an uncaught one (adapters refuse an option so)."""
    log = os.path.join(tempfile.mkdtemp(dir=work), "target.log")
    pid = os.fork()
    if pid == 0:
        serve.output_to(log, os.O_CREAT | os.O_TRUNC)
        os._exit(serve.run_for_code(sys.exit, "planted refusal: not with this layout"))
    _, status = os.waitpid(pid, 0)
    text = open(log).read()
    if os.waitstatus_to_exitcode(status) != 1 or text != "planted refusal: not with this layout\n":
        print("SystemExit with a message: exit %r, log %r" % (status, text))
        return False
    return True


def cause_then_peer(rank, world, run_dir):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + os.path.join(run_dir, "store"),
                            rank=rank, world_size=world)
    dist.barrier()
    if rank == 1:
        raise ValueError("planted cause in rank 1")
    dist.barrier()  # rank 0: fails once rank 1's process has ended


def cause_logged(work):
    """The failing rank's own traceback (not only torch.multiprocessing's quote of one failed
    rank) is in the log, ahead of any peer's consequence."""
    code, lines = lead(work, 2, cause_then_peer)
    ends = []  # the exception line of each traceback not quoted by torch.multiprocessing
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)") and not (
                i > 0 and "terminated with the following error" in lines[i - 1]):
            ends.append(exception_line(lines, i)[1])
    if code != 1 or "ValueError: planted cause in rank 1" not in ends:
        print("a rank's cause not in its own traceback: exit %r, tracebacks ending %r" % (code, ends))
        return False
    return True


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as work:
        if not exit_message_ok(work) or not cause_logged(work):
            return 1
        for r in range(rounds):
            if not round_ok(work):
                print("FAIL: round %d" % r)
                return 1
    print("%d rounds: the first traceback whole" % rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
