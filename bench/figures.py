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
    rates = {}  # (cached, threads, hand-written backward) -> median checks/s
    for b in tp["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        cached = "reference_cache:1" in b["name"]
        threads = 2 if "jobs:2" in b["name"] else 1
        hand = "hand_backward:0" not in b["name"]
        v = b.get("checks_per_s")
        rates[(cached, threads, hand)] = (v, b.get("cpu_ms_per_check"))
        figure(f"checks/s, small list, reference cache {'on' if cached else 'off'}, {threads} job(s)"
               + ("" if hand else ", blocks through autograd (baseline)"),
               round(v, 1), "checks/s", ">= 30 (median, 2 cores)" if hand else "-",
               v >= 30 if hand else None, cmd_tp,
               f"median of {b.get('repetitions', reps)}; load {ctx.get('load_avg', ['?'])[0]:.2f}"
               if ctx.get("load_avg") else f"median of {b.get('repetitions', reps)}")
    for threads in (1, 2):
        hand, base = rates.get((False, threads, True)), rates.get((False, threads, False))
        if hand and base and hand[1] and base[1]:
            figure(f"CPU per check, blocks through autograd over the hand-written backward, cache off, "
                   f"{threads} job(s)", round(base[1] / hand[1], 2), "x", "-", None, cmd_tp,
                   f"{base[1]:.0f} -> {hand[1]:.0f} ms of CPU per check (every thread and mpi rank); "
                   f"checks/s {base[0]:.1f} -> {hand[0]:.1f}; same bits (kernels/hand_backward.h); "
                   "medians of the same run")
else:
    missing("checks/s, small list", ">= 30 (median, 2 cores)", cmd_tp)

# Time split (wall, uninstrumented) and operator / piece counts.
sp = load("split.json")
cmd_sp = f"{build}/bench/bench_time_split {reps}"
if sp:
    t = sp["split_ms"]
    wall = t["wall_ms"]
    parts = ", ".join(f"{k[:-3]} {t[k]:.1f} ({100 * t[k] / wall:.0f} %)"
                      for k in ("reference_ms", "engine_ms", "assemble_and_numeric_ms", "oracles_ms", "rest_ms"))
    # The model arithmetic (the engine's ranks and the reference pair) among every operator call.
    by_phase = sp.get("torch_ops_per_check_by_phase", {})
    model_calls = by_phase.get("engine", 0) + by_phase.get("reference", 0)
    model_share = (f"engine + reference {100 * model_calls / sp['torch_ops_per_check']:.1f} % of the calls; "
                   if by_phase and sp["torch_ops_per_check"] else "")
    orc = ", ".join(f"{k} {v:.1f}" for k, v in sorted(t["by_oracle_ms"].items(), key=lambda kv: -kv[1]) if v >= 0.05)
    figure("wall time per checked config (small list, uncached)", round(wall, 1), "ms", "-", None, cmd_sp,
           f"{parts}; oracles: {orc}; cpu {t['process_cpu_ms']:.1f} ms per check in the process (all threads) + "
           f"{t.get('children_cpu_ms', 0):.1f} ms in child processes (mpi ranks): "
           f"{2e3 / (t['process_cpu_ms'] + t.get('children_cpu_ms', 0)):.1f} checks/s if 2 cores did nothing else; "
           f"slowest engine: " + "; ".join(f"#{x['index']} {x['engine_ms']:.0f} ms {x['config']}" for x in sp['slowest_engine_configs'][:3]) +
           f"; {sp['outermost_torch_ops_per_check']:.0f} outermost torch ops "
           f"({sp['torch_ops_per_check']:.0f} in all) and {sp['pieces_per_check']:.0f} reported pieces per check; "
           f"{model_share}load {sp['load_average_1m']}")
else:
    missing("wall time per checked config", "-", cmd_sp)
# The fast bf16 gemm against ATen's kernel, side by side in one process.
bg = load("bf16gemm.json")
cmd_bg = f"{build}/bench/bench_bf16_gemm {reps}"
if bg:
    c = bg["checks"]
    figure("CPU per check, ATen's bf16 gemm over the fast one (small list)", round(c["aten_over_fast"], 3), "x", "-",
           None, cmd_bg,
           f"{c['aten_cpu_ms_per_check']:.1f} vs {c['fast_cpu_ms_per_check']:.1f} ms; same verdicts: "
           f"{c['same_verdicts']}; per gemm (ATen / fast): " +
           ", ".join(f"{k['ta']}{k['tb']} {k['m']}x{k['n']}x{k['k']} {k['aten_over_fast']:.1f}x" for k in bg["kernel"]) +
           f"; load {bg['load_average_1m']}")
else:
    missing("CPU per check, ATen's bf16 gemm over the fast one", "-", cmd_bg)
# Configs on the mpi backend: a fresh mpirun job per config vs persistent jobs, side by side.
mj = load("mpijobs.json")
cmd_mj = f"{build}/bench/bench_mpi_jobs 6 3"
if mj and "speedup_runs_per_s" in mj:
    f, p = mj["fresh_job_per_run"], mj["persistent_job_after_first_round"]
    figure("mpi-backend runs/s, persistent job vs fresh job per config", round(mj["speedup_runs_per_s"], 1),
           "x", "-", None, cmd_mj,
           f"{p['runs_per_s']:.2f} vs {f['runs_per_s']:.2f} runs/s; cpu per run (with mpirun and ranks) "
           f"{p['cpu_ms_per_run']:.0f} vs {f['cpu_ms_per_run']:.0f} ms; first round of the persistent job "
           f"(its start) {mj['persistent_job_first_round']['runs_per_s']:.2f} runs/s; worlds {mj['worlds']}; "
           f"observations bitwise equal: {mj['observations_bitwise_equal']}; load {mj['load_average_1m']}")
else:
    missing("mpi-backend runs/s, persistent job vs fresh job per config", "-", cmd_mj)
cg = load("callgrind.json")
cmd_cg = "scripts/bench callgrind  (valgrind --tool=callgrind ... bench_check_throughput; bench/callgrind_split.py)"
if cg:
    share = 100 * cg["overhead_share"]
    bs = cg["by_side_ir"]
    figure("harness overhead (instructions outside torch)", round(share, 1), "% of a check", "< 50 %",
           share < 50, cmd_cg,
           f"{cg['total_ir'] / 1e9:.1f} G instructions: torch {bs['torch'] / 1e9:.1f} G + shared for torch "
           f"{bs['shared_for_torch'] / 1e9:.1f} G; paradiff {bs['paradiff'] / 1e9:.2f} G + shared for paradiff "
           f"{bs['shared_for_paradiff'] / 1e9:.2f} G")
else:
    missing("harness overhead (instructions outside torch)", "< 50 %", cmd_cg)

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
    bd = rss.get("bounds", {})
    sizes = f"world <= {bd.get('world')}, layers <= {bd.get('layers')}, hidden <= {bd.get('hidden')}, steps <= {bd.get('steps')}"
    figure(f"worker RSS growth over {rss['configs']} configs (after {rss['warmup']} warm-up)", round(g, 2), "%",
           "< 5 %", g < 5, cmd_rss.replace("N WARMUP", f"{rss['configs']} {rss['warmup']}"),
           f"{rss['rss_after_warmup_kib'] / 1024:.0f} -> {rss['rss_final_kib'] / 1024:.0f} MiB; "
           f"from the first config {rss['rss_after_first_kib'] / 1024:.0f} MiB: {rss['growth_from_first_pct']:+.1f} %; "
           f"configs {sizes}; {rss['elapsed_s']:.0f} s; lost tasks {rss['lost_tasks']}, restarts {rss['worker_restarts']}")
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
                         "execs_to_detect": s["execs_to_detect"], "signature": s["signature"],
                         "minimize_s": round(sum(mins), 1) if mins else None, "minimized": s["minimized"]})
    med = zoo["median_time_to_detect_s"]
    figure("median time to detect per zoo switch", round(med, 1), "s", "< 30 s", med < 30, cmd_zoo,
           f"detected {100 * zoo['detection_rate']:.0f} %, false positives {zoo['false_positives']} "
           f"{' '.join(zoo['false_positive_signatures'])}; median over the detected switches")
    found_min = [r["minimize_s"] for r in zoo_rows if r["minimize_s"] is not None]
    if found_min:
        figure("median minimization time per zoo switch", round(statistics.median(found_min), 1), "s", "-",
               None, cmd_zoo)
else:
    missing("median time to detect per zoo switch", "< 30 s", cmd_zoo)

# External targets: warm workers (protocol 2) vs one launch per run, and the spawn-per-config script.
cmd_tg = f"{build}/bench/bench_target_throughput TARGET N 1 2 --keep {out}/target-runs-NAME"
any_target = False
# The targets scripts/bench ran: every part file target-NAME.json but the script's own.
names = sorted(os.path.basename(p)[len("target-"):-len(".json")]
               for p in glob.glob(os.path.join(out, "target-*.json")))
for name in (n for n in names if n != "spawn"):
    t = load(f"target-{name}.json")
    if not t:
        continue
    any_target = True
    figure(f"warm / cold target runs per second, {t['target']}", round(t["warm_over_cold"], 1), "x",
           ">= 10x", t["warm_over_cold"] >= 10, cmd_tg.replace("TARGET", f"adapters/.../{name}.json").replace("NAME", name),
           f"warm {t['warm_runs_per_s']:.2f} runs/s, cold {t['cold_runs_per_s']:.2f} runs/s, {t['configs']} configs x "
           f"{t['rounds']} rounds (after the first round, the worker long started: "
           f"{t.get('warm_over_cold_after_first_round', float('nan')):.1f}x); "
           f"whole checks on warm workers {t['warm_checks_per_s']:.2f}/s; "
           f"failed {t['failed']}, observations differing warm vs cold {t['mismatches']}; load {t['load_average_1m']}")
    spawn = load("target-spawn.json") if name == "torch" else None
    if spawn and spawn["checked_per_s"] > 0:
        figure("paradiff checks (warm) / spawn-per-config script checks per second, torch target",
               round(t["warm_checks_per_s"] / spawn["checked_per_s"], 1), "x", "-", None,
               f"/usr/bin/python3 bench/spawn_per_config.py {out}/target-runs-torch/paradiff-target-*",
               f"script {spawn['checked_per_s']:.2f} checks/s ({spawn['checked']} configs its simple checker "
               f"takes, {spawn['skipped']} skipped, {spawn['failed']} failed); paradiff's target runs alone "
               f"{t['warm_runs_per_s']:.2f}/s warm, {t['cold_runs_per_s']:.2f}/s cold")
if not any_target:
    missing("warm / cold target runs per second", ">= 10x", cmd_tg)

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
    print(f"\n{'zoo switch':<36} {'found':<6} {'detect s':>9} {'execs':>6} {'minimize s':>11}  first signature")
    for r in zoo_rows:
        ms = "-" if r["minimize_s"] is None else r["minimize_s"]
        print(f"{r['switch']:<36} {'yes' if r['found'] else 'NO':<6} {r['time_to_detect_s']:>9.1f} "
              f"{r['execs_to_detect']:>6} {ms!s:>11}  {r['signature']}")
print(f"\nINFO: bench: figures in {os.path.join(out, 'figures.json')}")
