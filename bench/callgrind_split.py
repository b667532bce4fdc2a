#!/usr/bin/env python3
"""Model arithmetic vs harness overhead from a callgrind profile, in instructions (Ir).

Note [Callgrind attribution]: (docs/PERFORMANCE.md) every function's exclusive instructions go to
one side:
  torch     functions in the torch libraries (libtorch*, libc10*, and the libraries only torch calls:
            OpenBLAS, sleef, dnnl, gomp, ...) and at:: / c10:: / torch:: / caffe2:: template code
            instantiated in paradiff's own binary: "model arithmetic" (operators, their dispatch,
            autograd);
  paradiff  functions whose name mentions paradiff (ours, including lambdas and std::function glue
            around them): "harness overhead";
  shared    everything else (malloc / free, memcpy, TLS lookups, libstdc++, the dynamic loader):
            split between the two in proportion to the inclusive cost of the calls each side makes
            into it (as gprof does), recursively through shared callers.
So the communicator's reductions (torch ops) count as arithmetic, and a custom autograd function's
paradiff code (tensor parallelism) counts as overhead even though torch's backward calls it.
Collect only inside paradiff::CheckRun and the rank threads:

  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='paradiff::CheckRun*' \
    --toggle-collect='std::thread::_State_impl*' --callgrind-out-file=OUT PROGRAM ...

Usage: callgrind_split.py CALLGRIND_OUT [--top N]   prints one JSON object
"""
import json
import re
import sys

TORCH = re.compile(r"lib(torch|c10|openblas|gomp|sleef|shm)")


def parse(path):
    names = {"ob": {}, "fn": {}}
    fn_ob = {}          # function id -> object name
    arcs = []           # (caller fn id, callee fn id, callee ob or None, inclusive Ir)
    excl = {}           # function id -> exclusive Ir
    total = 0
    ob = fn = cob = cfn = None
    pending_call = False

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if not m:
            return rest
        key, text = m.group(1), m.group(2)
        if text is not None:
            names[kind][key] = text
        return names[kind].get(key, key)

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c0 = line[0]
            if pending_call and (c0.isdigit() or c0 in "+-*"):
                parts = line.split()
                ir = int(parts[1]) if len(parts) > 1 else 0
                arcs.append((fn, cfn, cob, ir))
                pending_call = False
                cob = None
                continue
            if c0.isdigit() or c0 in "+-*":
                parts = line.split()
                if len(parts) > 1:
                    ir = int(parts[1])
                    excl[fn] = excl.get(fn, 0) + ir
                    total += ir
                continue
            key, _, rest = line.partition("=")
            if key == "ob":
                ob = name("ob", rest)
            elif key == "fn":
                fn = name("fn", rest)
                fn_ob[fn] = ob
            elif key == "cob":
                cob = name("ob", rest)
            elif key == "cfn":
                cfn = name("fn", rest)
            elif key == "calls":
                pending_call = True
    return fn_ob, arcs, excl, total


TORCH_NAME = re.compile(r"^(?:\S+ )?(at|c10|torch|caffe2)::")


def side(fn, ob):
    base = (ob or "").rsplit("/", 1)[-1]
    if TORCH.search(base) or TORCH_NAME.match(fn):
        return "torch"
    if "paradiff" in fn:
        return "paradiff"
    return "shared"


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 15
    fn_ob, arcs, excl, total = parse(path)
    sides = {fn: side(fn, fn_ob.get(fn)) for fn in set(fn_ob) | set(excl)}
    callers = {}  # shared callee -> [(caller, inclusive Ir)]
    for caller, callee, _, ir in arcs:
        if sides.get(callee, "shared") == "shared" and caller is not None:
            callers.setdefault(callee, []).append((caller, ir))
    frac = {fn: 0.0 for fn in callers}  # share of a shared function done on torch's behalf
    for _ in range(60):
        for fn, ins in callers.items():
            num = den = 0.0
            for c, ir in ins:
                sc = sides.get(c, "shared")
                t = 1.0 if sc == "torch" else 0.0 if sc == "paradiff" else frac.get(c, 0.0)
                num += ir * t
                den += ir
            frac[fn] = num / den if den else 0.0
    by_side = {"torch": 0.0, "paradiff": 0.0, "shared_for_torch": 0.0, "shared_for_paradiff": 0.0}
    for fn, ir in excl.items():
        sd = sides.get(fn, "shared")
        if sd == "shared":
            f = frac.get(fn, 0.0)
            by_side["shared_for_torch"] += ir * f
            by_side["shared_for_paradiff"] += ir * (1 - f)
        else:
            by_side[sd] += ir
    arithmetic = by_side["torch"] + by_side["shared_for_torch"]
    by_object = {}
    for fn, ir in excl.items():
        o = (fn_ob.get(fn) or "?").rsplit("/", 1)[-1]
        by_object[o] = by_object.get(o, 0) + ir
    hot = sorted(excl.items(), key=lambda kv: -kv[1])[:top]
    hot_ours = sorted(((fn, ir) for fn, ir in excl.items() if sides.get(fn) == "paradiff"), key=lambda kv: -kv[1])[:top]
    fmt = lambda items: [{"fn": fn[:160], "ob": (fn_ob.get(fn) or "?").rsplit("/", 1)[-1], "side": sides.get(fn),
                          "ir": ir} for fn, ir in items]
    print(json.dumps({
        "total_ir": total,
        "arithmetic_ir": round(arithmetic),
        "overhead_ir": round(total - arithmetic),
        "overhead_share": (total - arithmetic) / total if total else None,
        "by_side_ir": {k: round(v) for k, v in by_side.items()},
        "exclusive_ir_by_object": dict(sorted(by_object.items(), key=lambda kv: -kv[1])),
        "hottest_exclusive": fmt(hot),
        "hottest_paradiff_exclusive": fmt(hot_ours),
    }, indent=2))


main()
