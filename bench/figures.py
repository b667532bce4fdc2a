#!/usr/bin/env python3
"""Assembles the benchmark parts in OUT (written by scripts/bench) into OUT/figures.json and prints
each figure beside its target. Parts that were not run are listed as missing, never guessed."""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
build = os.environ.get("PARADIFF_BUILD_DIR", "build")
reps = os.environ.get("PARADIFF_BENCH_REPS", "5")


def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


figures = []


def figure(name, value, unit, target, met, command, note=""):
    figures.append({"figure": name, "value": value, "unit": unit, "target": target, "met": met,
                    "command": command, "note": note})


def missing(name, target, command):
    figure(name, None, "", target, None, command, "not run")


# Checked configs per second (Google Benchmark medians).
tp = load("throughput.json")
cmd_tp = f"{build}/bench/bench_check_throughput --benchmark_repetitions={reps} --benchmark_report_aggregates_only=true"
if tp:
    ctx = tp.get("context", {})
    for b in tp["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        cached = "reference_cache:1" in b["name"]
        threads = b.get("threads", 1)
        v = b.get("checks_per_s")
        figure(f"checks/s, small list, reference cache {'on' if cached else 'off'}, {threads} thread(s)",
               round(v, 1), "checks/s", ">= 30 (median, 2 cores)", v >= 30, cmd_tp,
               f"median of {b.get('repetitions', reps)}; load {ctx.get('load_avg', ['?'])[0]:.2f}"
               if ctx.get("load_avg") else f"median of {b.get('repetitions', reps)}")
else:
    missing("checks/s, small list", ">= 30 (median, 2 cores)", cmd_tp)

# Time split.
sp = load("split.json")
cmd_sp = f"{build}/bench/bench_time_split {reps}"
if sp:
    ph = sp["phases"]
    tot = ph["total"]["cpu_ms"]
    parts = ", ".join(f"{k} {ph[k]['cpu_ms']:.1f} ms cpu ({100 * ph[k]['cpu_ms'] / tot:.0f} %, "
                      f"overhead {ph[k]['overhead_cpu_ms']:.1f})" for k in ("reference", "engine", "oracles"))
    figure("time per checked config (cpu; wall)", round(tot, 1), "ms",
           "-", None, cmd_sp, f"{parts}; wall {sp['wall_ms_per_check_uninstrumented']:.1f} ms uninstrumented, "
           f"{sp['wall_ms_per_check_instrumented']:.1f} ms instrumented; load {sp['load_average_1m']}")
    share = 100 * sp["harness_overhead_share"]
    figure("harness overhead (cpu outside torch ops)", round(share, 1), "% of a check", "< 50 %",
           share < 50, cmd_sp)
else:
    missing("harness overhead", "< 50 %", cmd_sp)

# Peak resident memory.
mem = sorted((load(os.path.basename(p)) for p in glob.glob(os.path.join(out, "memory-w*.json"))),
             key=lambda m: m["world"] if m else 0)
for m in mem:
    if not m:
        continue
    gib = m["vm_hwm_kib"] / 2**20
    w = m["world"]
    figure(f"peak resident memory, tiny config, world {w}", round(gib, 3), "GiB",
           "< 2 GiB" if w == 64 else "-", gib < 2 if w == 64 else None,
           f"{build}/bench/bench_peak_memory {w}",
           f"verdict {m['verdict']}; {m['rss_before_check_kib'] / 1024:.0f} MiB before the check; {m['check_s']:.1f} s")
if not mem:
    missing("peak resident memory, tiny config", "< 2 GiB at world 64", f"{build}/bench/bench_peak_memory 64")

# Worker memory growth.
rss = load("rss.json")
cmd_rss = f"{build}/bench/bench_worker_rss {build}/tools/paradiff N WARMUP"
if rss:
    g = rss["growth_pct"]
    figure(f"worker RSS growth over {rss['configs']} configs (after {rss['warmup']} warm-up)", round(g, 2), "%",
           "< 5 %", g < 5, cmd_rss.replace("N WARMUP", f"{rss['configs']} {rss['warmup']}"),
           f"{rss['rss_after_warmup_kib'] / 1024:.0f} -> {rss['rss_final_kib'] / 1024:.0f} MiB; "
           f"from the first config {rss['rss_after_first_kib'] / 1024:.0f} MiB: {rss['growth_from_first_pct']:+.1f} %; "
           f"{rss['elapsed_s']:.0f} s; lost tasks {rss['lost_tasks']}, restarts {rss['worker_restarts']}")
else:
    missing("worker RSS growth over 10,000 configs", "< 5 %", cmd_rss)

# Zoo: time to detect and minimization time per switch.
zoo = load("zoo.json")
cmd_zoo = (f"{build}/tools/paradiff zoo run --budget BUDGET --jobs 2 --seed 1 --stop-on-first "
           f"--minimize-budget-s M --workdir {out}/zoo-work --json {out}/zoo.json")
zoo_rows = []
if zoo:
    for s in zoo["switches"]:
        mins = []
        for p in glob.glob(os.path.join(out, "zoo-work", s["switch"], "findings", "*", "minimize.json")):
            with open(p) as f:
                d = json.load(f)
            if "seconds" in d:
                mins.append(d["seconds"])
        zoo_rows.append({"switch": s["switch"], "found": s["found"], "time_to_detect_s": s["time_to_detect_s"],
                         "execs_to_detect": s["execs_to_detect"],
                         "minimize_s": round(sum(mins), 1) if mins else None, "minimized": s["minimized"]})
    med = zoo["median_time_to_detect_s"]
    figure("median time to detect per zoo switch", round(med, 1), "s", "< 30 s", med < 30, cmd_zoo,
           f"detected {100 * zoo['detection_rate']:.0f} %, false positives {zoo['false_positives']}; "
           "median over the detected switches")
    found_min = [r["minimize_s"] for r in zoo_rows if r["minimize_s"] is not None]
    if found_min:
        figure("median minimization time per zoo switch", round(statistics.median(found_min), 1), "s", "-",
               None, cmd_zoo)
else:
    missing("median time to detect per zoo switch", "< 30 s", cmd_zoo)

doc = {"figures": figures, "zoo": zoo_rows}
with open(os.path.join(out, "figures.json"), "w") as f:
    json.dump(doc, f, indent=2)

print(f"\n{'figure':<62} {'value':>10} {'unit':<14} {'target':<26} met")
for fig in figures:
    v = "-" if fig["value"] is None else fig["value"]
    met = {True: "yes", False: "NO", None: "-"}[fig["met"]]
    print(f"{fig['figure']:<62} {v!s:>10} {fig['unit']:<14} {fig['target']:<26} {met}")
    if fig["note"]:
        print(f"{'':<4}{fig['note']}")
if zoo_rows:
    print(f"\n{'zoo switch':<36} {'found':<6} {'detect s':>9} {'execs':>6} {'minimize s':>11}")
    for r in zoo_rows:
        ms = "-" if r["minimize_s"] is None else r["minimize_s"]
        print(f"{r['switch']:<36} {'yes' if r['found'] else 'NO':<6} {r['time_to_detect_s']:>9.1f} "
              f"{r['execs_to_detect']:>6} {ms!s:>11}")
print(f"\nINFO: bench: figures in {os.path.join(out, 'figures.json')}")
