"""Ranks that outlive a config (docs/TARGETS.md "Warm workers"): a warm worker's crew.

A crew is `world` rank processes forked from the warm worker, with one gloo process group formed
when the crew starts. Each takes run dirs over its own pipe, runs train(rank, world, run_dir,
*args) with stdout and stderr appended to RUN/target.log and its cwd in RUN, and answers its exit
code, stamped with the time it answered. The worker keeps one crew per world size, formed at the
first config of that size; a crew in which a rank failed or died is killed, and the next config of
its size gets a fresh one (a hung crew dies with its worker, which paradiff's watchdog kills). A
config's own objects (model, DDP, optimizer) die with its train call; what a crew carries from one
config to the next is the process group and what the framework keeps per process, which is why an
adapter opts in only where its framework keeps no config's state in that group (DDP and
ZeroRedundancyOptimizer build everything per call: adapters/torch/adapter.py, and
adapters/torch2/adapter.py's ddp). warm_leaks_nothing (tests/e2e/lib.sh) checks it byte for byte.

The group comes from a file store in a directory beside the run dirs, removed once the group is
formed.
"""
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time

import serve

_in_crew = False  # True in a crew's rank: its group outlives the config (join_group)


def join_group(dist, rank, world, run_dir):
    """Forms the config's gloo group from a file store in the run dir (every adapter's way), except
    in a crew's rank, whose group is already formed at this world size."""
    if not _in_crew:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(os.path.abspath(run_dir), "store"),
                                rank=rank, world_size=world)


def _say(fd, text):
    os.write(fd, (text + "\n").encode())


def _rank(index, world, store, train, args, requests, replies, first_log):
    """A crew's rank: forms the group, then runs the run dirs it is sent until its pipe ends. Its
    output goes to the log of the run it works for (the first run's while it forms the group), to
    the worker's log in between."""
    global _in_crew
    _in_crew = True
    serve.mark_exits_hard()
    serve.die_with_parent()
    serve.null_stdin()  # the worker's stdin holds paradiff's requests
    worker_log = os.dup(1), os.dup(2)
    serve.output_to(first_log, os.O_APPEND)
    serve.exit_now(serve.run_for_code(_serve_rank, index, world, store, train, args, requests, replies,
                                      worker_log))


def _serve_rank(index, world, store, train, args, requests, replies, worker_log):
    def answer(text):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(worker_log[0], 1)
        os.dup2(worker_log[1], 2)
        _say(replies, "%s %.9f" % (text, time.monotonic()))  # the clock every rank shares (collect)

    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=index, world_size=world)
    answer("ready")
    for line in os.fdopen(requests):
        run_dir = line.strip()
        os.environ[serve.MODULES_ENV] = os.path.join(run_dir, serve.MODULES_FILE)
        serve.output_to(os.path.join(run_dir, "target.log"), os.O_APPEND)
        os.chdir(run_dir)
        code = serve.run_for_code(train, index, world, run_dir, *args)
        answer(str(code))
        if code:
            sys.exit(code)


class Crew:
    """One crew, on the worker's side: its ranks' pids, the pipes to them, its store."""

    def __init__(self, world, train, args, run_dir, inherited):
        self.pids, self.requests, self.replies = [], [], []
        self.store_dir = tempfile.mkdtemp(prefix="paradiff-crew-", dir=os.path.dirname(run_dir))
        store = os.path.join(self.store_dir, "store")
        sys.stdout.flush()
        sys.stderr.flush()
        serve.freeze_heap()
        for index in range(world):
            req_r, req_w = os.pipe()
            rep_r, rep_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                for fd in inherited + self.requests + self.replies + [req_w, rep_r, serve.REPLY_FD]:
                    os.close(fd)
                _rank(index, world, store, train, args, req_r, rep_w, os.path.join(run_dir, "target.log"))
            os.close(req_r)
            os.close(rep_w)
            self.pids.append(pid)
            self.requests.append(req_w)
            self.replies.append(rep_r)

    def forget_store(self):
        """Removes the store once the group is formed (torch 1.13's gloo group reads it only while
        it connects), so that a crew killed with its worker leaves nothing behind."""
        shutil.rmtree(self.store_dir, ignore_errors=True)

    def fds(self):
        return self.requests + self.replies

    def collect(self, good):
        """Reads one answer from every rank: None when every text is good, else the failure that
        came first, as (rank, text; "" for a rank that died without answering), without waiting
        for ranks left blocked in a collective. A failing rank's peers fail after it (a failed
        rank answers and exits, and its closed connections fail their collectives), and its answer
        or its death is readable before theirs: of the failures readable at the first, a death
        comes first, then the earliest stamp."""
        pending = dict(zip(self.replies, range(len(self.replies))))
        failures = []
        while pending:
            # Blocks until the first failure, then takes only what is readable already.
            ready, _, _ = select.select(list(pending), [], [], 0 if failures else None)
            if not ready:
                break
            for fd in ready:
                index = pending.pop(fd)
                text, _, stamp = os.read(fd, 64).decode().strip().partition(" ")
                if not good(text):
                    failures.append((text != "", float(stamp or 0), index, text))
        if not failures:
            return None
        _, _, index, text = min(failures)
        return index, text

    def send(self, run_dir):
        for fd in self.requests:
            _say(fd, run_dir)

    def dismiss(self):
        """Kills the crew's ranks and reaps them; returns their statuses by rank."""
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        statuses = [os.waitpid(pid, 0)[1] for pid in self.pids]
        for fd in self.fds():
            os.close(fd)
        shutil.rmtree(self.store_dir, ignore_errors=True)
        return statuses


class Crews:
    """The worker's side: runs each config on the crew of its world size, formed at the first
    such config and kept while it succeeds (idle ranks block on their pipes)."""

    def __init__(self, train, args):
        self.train, self.args = train, args
        self.crews = {}

    def run(self, run_dir):
        """Runs run_dir's config on a crew; returns the worker's answer for it."""
        world = json.load(open(os.path.join(run_dir, "run.json")))["world"]
        # Created before any rank appends to it, truncated as a leader's log is.
        open(os.path.join(run_dir, "target.log"), "w").close()
        crew = self.crews.get(world)
        if crew is None:
            inherited = [fd for c in self.crews.values() for fd in c.fds()]
            crew = self.crews[world] = Crew(world, self.train, self.args, run_dir, inherited)
            failure = crew.collect(lambda answer: answer == "ready")
            if failure:
                return self._fail(world, run_dir, failure)
            crew.forget_store()
        crew.send(run_dir)
        failure = crew.collect(lambda answer: answer == "0")
        return self._fail(world, run_dir, failure) if failure else {"run_dir": run_dir, "exit": 0}

    def _fail(self, world, run_dir, failure):
        index, answer = failure
        status = self.crews.pop(world).dismiss()[index]
        if answer.isdigit() and int(answer) != 0:
            why = "exited with code " + answer
        elif os.WIFSIGNALED(status):
            why = "terminated with signal " + signal.Signals(os.WTERMSIG(status)).name
        else:
            why = "exited with code %d" % os.WEXITSTATUS(status)
        with open(os.path.join(run_dir, "target.log"), "a") as log:
            log.write("paradiff crew: rank %d %s\n" % (index, why))
        return {"run_dir": run_dir, "exit": 1}

    def dismiss(self):
        for crew in self.crews.values():
            crew.dismiss()
        self.crews = {}
