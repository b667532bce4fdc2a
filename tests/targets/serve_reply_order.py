#!/usr/bin/python3
"""Regression test of adapters/torch/serve.py: once a warm worker replies for a run dir, paradiff
owns it again and removes it (targets/target_runner.cpp), so the worker must be done with it. A
rank's record of its modules (serve.record_imports, in the run dir) was read and removed after the
reply on the crews path (adapters/torch/crew.py): paradiff's removal, racing with it, failed on
the vanished file and left the run dir behind (about one clean run in fifty in a torch campaign).
Here a worker serves run dirs whose runs record their modules, on both paths (a leader forked per
run, and crews), with the worker's reading of the record slowed down; at each reply the run dir
must hold no record. Exits 0 when both paths hold, 1 otherwise.
Usage: serve_reply_order.py"""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import serve  # noqa: E402

RUNS = 3


def record(run_dir):  # what a rank does when its config is done
    os.environ[serve.MODULES_ENV] = os.path.join(run_dir, serve.MODULES_FILE)
    serve.record_imports()


class Crews:  # crew.Crews' interface, its run done in the worker itself
    def run(self, run_dir):
        record(run_dir)
        return {"run_dir": run_dir, "exit": 0}

    def dismiss(self):
        pass


def serve_in_child(crews, requests, reply):
    pid = os.fork()
    if pid == 0:
        requests_r, reply_w = requests[0], reply[1]
        os.close(requests[1])  # else its stdin never ends
        os.close(reply[0])
        os.dup2(requests_r, 0)
        os.dup2(reply_w, serve.REPLY_FD)
        read = serve._read_recorded

        def slow_read(path):  # widens the window in which a late read races paradiff's removal
            time.sleep(0.3)
            return read(path)

        serve._read_recorded = slow_read
        sys.stdin = os.fdopen(0)
        serve.serve(run=None if crews else record, crews=Crews() if crews else None)
        os._exit(0)
    return pid


def check(crews, work):
    requests_r, requests_w = os.pipe()
    reply_r, reply_w = os.pipe()
    pid = serve_in_child(crews, (requests_r, requests_w), (reply_r, reply_w))
    os.close(requests_r)
    os.close(reply_w)
    replies = os.fdopen(reply_r)
    bad = []
    for _ in range(RUNS):
        run_dir = tempfile.mkdtemp(dir=work)
        os.write(requests_w, (run_dir + "\n").encode())
        answer = json.loads(replies.readline())
        left = sorted(os.listdir(run_dir))
        if answer.get("exit") != 0 or serve.MODULES_FILE in left:
            bad.append((answer, left))
    os.close(requests_w)
    os.waitpid(pid, 0)
    what = "crews" if crews else "a leader per run"
    if bad:
        print("FAIL (%s): at the reply the run dir still held the worker's file: %s" % (what, bad))
        return False
    print("ok (%s): %d replies, each after the worker was done with its run dir" % (what, RUNS))
    return True


def main():
    cache, work = tempfile.mkdtemp(), tempfile.mkdtemp()
    os.environ["XDG_CACHE_HOME"] = cache  # the worker's kept list of imports
    try:
        ok = all([check(False, work), check(True, work)])
    finally:
        shutil.rmtree(cache)
        shutil.rmtree(work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
