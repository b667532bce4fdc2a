"""Protocol 2, warm workers (docs/TARGETS.md "Warm workers"): an adapter's process does its imports
once, then runs the run directories paradiff sends it, one after another.

paradiff starts the worker with requests on stdin (one absolute run dir per line) and a reply pipe
on file descriptor 3; the worker's own stdout and stderr go to its log. For each run dir the worker
forks a leader, a fresh copy of the warm process (so nothing one config does reaches the next),
in its own process group, with stdout and stderr in RUN/target.log and its cwd in RUN, that runs
the config exactly as a protocol-1 launch does (forking the ranks itself). When the leader is gone
its group is killed (ranks it left behind) and the worker replies one JSON line: {"run_dir": RUN,
"exit": CODE} or {"run_dir": RUN, "signal": SIGNAL}. The end of stdin ends the worker. An adapter
whose framework keeps no config's state in a process may run its configs on ranks that outlive
them instead (crew.py).

Frameworks import much of themselves lazily, inside the calls a rank makes (DeepSpeed's ZeRO
optimizer check imports torch.compile's machinery: 2.6 s of every run). A rank that calls
record_imports() when its config is done tells its worker the modules it holds; the worker imports
the ones it lacks before its next fork, so later configs find them loaded. It also keeps the list
for the next worker of the same command (interpreter, arguments and module path), in
~/.cache/paradiff/serve-imports/ ($XDG_CACHE_HOME/paradiff/... where set), which imports them
before its first fork: a worker's first config then does not import them in every rank, and its
second does not wait for the worker to import them. A module that no longer imports is skipped.
Importing changes no training state (warm_leaks_nothing in tests/e2e/lib.sh checks the outputs
byte for byte).

Every fork starts from a frozen heap (gc.freeze, see freeze_heap): a forked child's garbage
collection would otherwise walk, and copy on write, every object of the warm process.
"""
import ctypes
import gc
import hashlib
import importlib
import json
import os
import signal
import sys
import traceback

REPLY_FD = 3
MODULES_ENV = "PARADIFF_SERVE_MODULES"  # where a rank records its modules (warm workers only)
MODULES_FILE = ".paradiff-serve-modules"  # in the run dir


def die_with_parent():
    """SIGKILL this process when its parent ends (PR_SET_PDEATHSIG): a worker killed by paradiff
    (its own worker killed by a campaign's pool, core/child_process.h) takes its leader along, and a
    leader its ranks; otherwise they would outlive it, still in a collective."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def freeze_heap():
    """Moves every object this process tracks to the collector's permanent generation, right
    before a fork (gc.freeze). A collection in a child then skips the inherited heap; a full one
    would walk every object of the imported frameworks and write to its header, copying their
    pages on write (DeepSpeed's ZeRO-3 initialization calls gc.collect: 0.43 s of a 1.8 s warm
    run at world 4). Frozen objects are never collected: the modules, which live as long as the
    process anyway, and the few objects of a request."""
    gc.freeze()


# True in a process whose group is never torn down: one that ends with os._exit once its config
# is done (a rank forked by fork_ranks, which multiprocessing ends so, and a warm worker's leader,
# _lead), and a crew's rank, whose group outlives the config (crew.py).
_exits_hard = False


def end_group(dist, destroy=None):
    """Ends a rank's process group after its last collective. A barrier first: gloo's barrier
    waits for its own sends, so a rank past it owes no peer a byte. Then, in a process that ends
    with os._exit or a crew's rank, nothing more: destroying the group (gloo closes its pairs and
    joins its threads; DDP's reducer may hold the group's last reference) cost 15-40 ms of a 0.15 s
    warm torch 1.13 run and only delays the exit. Elsewhere (a launch at world 1, torchrun)
    destroy(), by default dist.destroy_process_group."""
    dist.barrier()
    if not _exits_hard:
        (destroy or dist.destroy_process_group)()


def mark_exits_hard():
    global _exits_hard
    _exits_hard = True


def _rank(index, train, *args):
    mark_exits_hard()
    die_with_parent()
    try:
        train(index, *args)
    except BaseException as e:
        # Every failing rank writes its own traceback, whole (see print_exception), before its
        # process ends and its peers lose it. torch.multiprocessing quotes one failed rank's
        # Exception in the leader, the first it notices, and that may be a peer whose collective
        # failed because this rank died ("Connection closed by peer"), not the cause; any other
        # exception (torch.distributed.checkpoint's CheckpointException derives from
        # BaseException) multiprocessing prints in each failing rank, line by line, interleaved.
        if not isinstance(e, (SystemExit, KeyboardInterrupt)):
            print_exception()
        raise


def fork_ranks(train, run_dir, *args):
    """Runs train(rank, world, run_dir, *args) for every rank of run_dir's config: in this process
    at world 1, else in processes forked from it (torch.multiprocessing), each dying with it."""
    world = json.load(open(os.path.join(run_dir, "run.json")))["world"]
    if world == 1:
        train(0, 1, run_dir, *args)
    else:
        import torch.multiprocessing as mp
        freeze_heap()
        mp.start_processes(_rank, args=(train, world, run_dir) + args, nprocs=world, start_method="fork")


def record_imports():
    """Records this process's modules for its warm worker; does nothing outside one."""
    path = os.environ.get(MODULES_ENV)
    if not path:
        return
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(sorted(sys.modules)))
    os.replace(path + ".tmp", path)


def _read_names(path):
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return []


def _read_recorded(path):
    names = _read_names(path)
    try:
        os.remove(path)
    except OSError:
        pass
    return names


class _KnownImports:
    """The modules this worker's command has recorded, kept across workers (see the module doc)."""

    def __init__(self):
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        key = hashlib.sha256(json.dumps([sys.executable, sys.argv, sys.path]).encode()).hexdigest()[:20]
        self.path = os.path.join(base, "paradiff", "serve-imports", key + ".txt")
        self.names = set(_read_names(self.path))

    def add(self, names):
        """Keeps names with the others; rewrites the list (atomically) when one is new to it."""
        if set(names) <= self.names:
            return
        self.names.update(names)
        tmp = "%s.%d.tmp" % (self.path, os.getpid())
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "w") as f:
                f.write("\n".join(sorted(self.names)))
            os.replace(tmp, self.path)
        except OSError:  # a cache it cannot write only costs the next worker its imports
            pass


def _import(names):
    for name in names:
        if name not in sys.modules and not name.startswith("__"):
            try:
                importlib.import_module(name)
            except BaseException:  # a module that only imports in a rank's context stays lazy
                pass


def serve(run=None, crews=None):
    """Serves run dirs until stdin ends: run(run_dir) runs one config in a forked leader, or, where
    the adapter opts in, crews (crew.Crews) runs it on ranks that outlive a config."""
    reply = os.fdopen(REPLY_FD, "w", buffering=1)
    known = _KnownImports()
    _import(sorted(known.names))
    for line in sys.stdin:
        run_dir = line.strip()
        if not run_dir:
            continue
        # In the run dir, which paradiff owns, and read (and removed) before the reply: a worker
        # killed at any point leaves nothing behind, and the run dir ends as a protocol-1 one.
        modules = os.path.join(run_dir, MODULES_FILE)
        if crews is not None:
            _answer(reply, crews.run(run_dir), modules, known)
            continue
        os.environ[MODULES_ENV] = modules
        sys.stdout.flush()
        sys.stderr.flush()
        freeze_heap()
        pid = os.fork()
        if pid == 0:
            _lead(run, run_dir)
        try:
            os.setpgid(pid, pid)  # also done by the leader: whichever runs first
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        answer = {"run_dir": run_dir}
        if os.WIFSIGNALED(status):
            answer["signal"] = os.WTERMSIG(status)
        else:
            answer["exit"] = os.WEXITSTATUS(status)
        _answer(reply, answer, modules, known)
    if crews is not None:
        crews.dismiss()


def _answer(reply, answer, modules, known):
    """Ends a run: its ranks' recorded modules are read and removed first, then the reply, after
    which paradiff owns the run dir again (and may remove it while this worker would still touch
    it), then the imports."""
    names = _read_recorded(modules)
    reply.write(json.dumps(answer) + "\n")
    _import(names)
    known.add(names)


def _write_whole(text):
    """text on stderr in one write, after what stdout and stderr hold."""
    sys.stdout.flush()
    sys.stderr.flush()
    data = text.encode()
    while data:
        data = data[os.write(2, data):]


def print_exception():
    """The exception being handled, with its traceback, on stderr in one write. Ranks that fail
    together share their run's log, and printed line by line their tracebacks interleave: paradiff
    signs a crash by the first traceback in the log, its exception and innermost frame
    (targets/crash_state.cpp), and a frame torn from its exception signs it differently."""
    _write_whole(traceback.format_exc())


def run_for_code(fn, *args):
    """fn(*args)'s exit code as a process's: 0, SystemExit's code (1 with its message printed, as
    Python prints an uncaught one, when the code is not a number), or 1 with the traceback
    printed."""
    try:
        fn(*args)
        return 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        _write_whole("%s\n" % (e.code,))
        return 1
    except BaseException:
        print_exception()
        return 1


def exit_now(code):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def null_stdin():
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def output_to(path, flags):
    """Points stdout and stderr at path, opened write-only with flags."""
    log = os.open(path, os.O_WRONLY | flags, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _lead(run, run_dir):
    def lead():
        die_with_parent()
        os.setpgid(0, 0)
        os.close(REPLY_FD)
        null_stdin()
        output_to(os.path.join(run_dir, "target.log"), os.O_CREAT | os.O_TRUNC)
        os.chdir(run_dir)
        run(run_dir)

    mark_exits_hard()
    exit_now(run_for_code(lead))
