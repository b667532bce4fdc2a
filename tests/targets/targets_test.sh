#!/usr/bin/env bash
# End-to-end tests of external targets (docs/TARGETS.md). Cases without torch: broken targets get a
# clear finding (crash / hang / silent / shape), a malformed target file exits 2 naming the field,
# DeepSpeed import/export round-trips. Cases labelled torch (adapters/torch, python3-torch): the
# adapter is bitwise equal to the reference at world 1 in fp32 and with bf16 compute, a short campaign is clean, the
# planted bug is caught and minimized, a target reporting only parameters is clean and its planted
# bug caught. They exit 77 (skipped) when python3-torch is missing.
# Usage: targets_test.sh PARADIFF_BINARY SOURCE_DIR CASE
set -u
. "$(dirname "$0")/../e2e/lib.sh"
e2e_init "$1" "$2" "$3"
T=$SRC/tests/targets
need_torch() {
  /usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: python3-torch is not installed (scripts/setup installs it)"; exit 77; }
}
# Fails unless `paradiff run CONFIG --target torch.json` passes with the mirror oracle judging (not
# skipping) and passing.
mirror_passes() {
  expect 0 "$P" run "$1" --target "$SRC/adapters/torch/torch.json" --report "$TMP/r.json"
  /usr/bin/python3 - "$TMP/r.json" <<'PY' || fail "$1: the mirror oracle did not judge and pass"
import json, sys
r = json.load(open(sys.argv[1]))
mirror = [o for o in r["oracles"] if o["name"] == "mirror"]
print("mirror:", mirror)
sys.exit(0 if mirror and mirror[0]["status"] == "pass" else 1)
PY
}

# Fails unless the torch target at world 1 computes step 0's loss and gradients of CONFIG bit for
# bit as paradiff's reference does (model_arithmetic "paradiff", docs/TARGETS.md).
torch_bitwise() {
  expect 0 "$P" run "$1" --target "$SRC/adapters/torch/torch.json" --report "$TMP/r.json"
  /usr/bin/python3 - "$TMP/r.json" <<'PY' || fail "step-0 loss / gradients are not bitwise equal to the reference"
import json, sys
r = json.load(open(sys.argv[1]))
s0 = [c for c in r["comparisons"] if c["step"] == 0 and c["kind"] in ("loss", "grad")]
bad = [c for c in s0 if c["error"] != c["ref_error"]]
print("step-0 loss/grad comparisons:", len(s0), "not bitwise:", len(bad))
# grad_norm is torch's own float32 norm, checked against its reported gradients under the fp32 bound.
cons = [c for c in r["comparisons"] if c["detail"] == "consistency"]
print("norm consistency:", [(c["error"], c["bound"]) for c in cons])
sys.exit(1 if bad or len(s0) < 10 or not cons or not all(c["ok"] and c["bound"] > 1e-8 for c in cons) else 0)
PY
}

case $CASE in
  broken_targets)
    for m in crash:crash.target.-.-.run.exit hang:hang.target.-.-.run.timeout \
             silent:crash.target.-.-.run.no_output shape:crash.target.-.-.run.shape \
             no_grad:crash.target.-.-.run.no_output; do
      expect 3 "$P" run "$T/small_dp2.json" --target "$T/fake_${m%%:*}.json"
      has "sig=${m#*:} "
      [ "${m%%:*}" = shape ] && has "has shape \[12,8\], the model's embed.wte is \[11,8\]"
    done
    # fake_no_grad declares "reports": ["grad"] but writes parameters only.
    has "step 0: no rank wrote any grad tensor, but the run reports grad"
    # A NaN loss written as Python's json writes it (the bare token NaN) is an observation like any
    # other: the numeric oracle's finding, not unusable output.
    expect 3 "$P" run "$T/small_dp2.json" --target "$T/fake_nan_loss.json"
    has "sig=mismatch.numeric.loss.-.forward "
    has "worst index 0 expected [0-9.]* actual nan"
    ;;
  warm_broken_targets)
    # Protocol 2: the same findings from a warm worker as from one launch per run, and a worker
    # that dies or answers nonsense is a crash naming it; either way the next run gets a new one.
    warm() {
      printf '{"protocol": 2, "name": "fake-warm-%s", "command": ["/usr/bin/python3", "%s/fake_target.py", "serve", "%s"], "timeout_s": 3, "supports": {"max_world": 2, "zero_stages": [0, 1]}}' \
        "$1" "$T" "$1" >"$TMP/warm_$1.json"
    }
    for m in crash:crash.target.-.-.run.exit hang:hang.target.-.-.run.timeout \
             silent:crash.target.-.-.run.no_output shape:crash.target.-.-.run.shape \
             die:crash.target.-.-.run.exit garbage:crash.target.-.-.run.exit; do
      warm "${m%%:*}"
      expect 3 "$P" run "$T/small_dp2.json" --target "$TMP/warm_${m%%:*}.json"
      has "sig=${m#*:} "
    done
    has "its warm worker answered 'hello', not"
    expect 3 "$P" run "$T/small_dp2.json" --target "$TMP/warm_die.json"
    has "its warm worker exited with code 5 without answering \(log .*paradiff-worker-.*\.log kept\)"
    # The run's own log holds what the forked leader printed.
    expect 3 "$P" run "$T/small_dp2.json" --target "$TMP/warm_crash.json"
    has "fake target: crashing on purpose"
    # Two configs in one process: the crashed worker is replaced, the second run crashes alike.
    cp "$T/small_dp2.json" "$TMP/a.json"
    cp "$T/small_dp2.json" "$TMP/b.json"
    expect 3 "$P" replay "$TMP/a.json" "$TMP/b.json" --target "$TMP/warm_crash.json"
    [ "$(grep -c 'crashed: exited with code 3' "$TMP/out")" = 2 ] || fail "the second run did not crash alike"
    # A protocol-2 command takes no per-run placeholder and no launcher.
    echo '{"protocol": 2, "name": "x", "command": ["/bin/true", "{run_dir}"], "launcher": {"default": []}}' >"$TMP/t.json"
    expect 2 "$P" run "$T/small_dp2.json" --target "$TMP/t.json"
    has "command: a protocol-2 worker serves every run: no \{run_dir\}"
    has "launcher: a protocol-2 worker forks its own ranks: no launcher"
    expect 2 "$P" run "$T/small_dp2.json" --keep-run-dirs "$TMP/k"
    has "--keep-run-dirs keeps an external target's run dirs: it needs --target FILE"
    ;;
  unattended_runs_leave_nothing)
    # campaign and minimize remove every run dir, a failed run's too (docs/TARGETS.md "Failures"),
    # and a campaign's workers, killed at its end, leave nothing in the temp dir: neither their
    # warm workers' logs nor a run in flight (see Note [Job scratch] in fuzz/worker_pool.cpp).
    printf '{"protocol": 2, "name": "fake-warm-crash", "command": ["/usr/bin/python3", "%s/fake_target.py", "serve", "crash"], "timeout_s": 3, "supports": {"max_world": 2, "zero_stages": [0, 1]}}' \
      "$T" >"$TMP/warm_crash.json"
    mkdir "$TMP/tmp"
    expect 3 env TMPDIR="$TMP/tmp" "$P" campaign --target "$TMP/warm_crash.json" --runs 4 --jobs 2 \
      --seed 1 --workdir "$TMP/w" --minimize-budget-s 0
    has "campaign FINDINGS"
    cp "$TMP"/w/findings/*/config.json "$TMP/found.json"
    grep -q "run dir removed; \`paradiff run\` on the config keeps" "$TMP"/w/findings/*/report.json ||
      fail "the finding's message does not say its run dir was removed"
    expect 3 env TMPDIR="$TMP/tmp" "$P" minimize "$TMP/found.json" --target "$TMP/warm_crash.json" \
      --budget 5s --out "$TMP/min.json"
    left=$(ls -A "$TMP/tmp")
    [ -z "$left" ] || fail "left in the temp dir: $left"
    # `run` keeps the failed run's dir, and names it.
    expect 3 env TMPDIR="$TMP/tmp" "$P" run "$TMP/found.json" --target "$TMP/warm_crash.json"
    has "run dir $TMP/tmp/paradiff-target-[A-Za-z0-9]+ kept"
    ;;
  bad_target_file)
    echo '{"protocol": 1, "name": "x", "command": [], "supports": {"zero_stages": [5]}}' >"$TMP/t.json"
    expect 2 "$P" run "$T/small_dp2.json" --target "$TMP/t.json"
    has "command: required"
    has "supports.zero_stages: must be a non-empty array of stages 0-3"
    expect 2 "$P" campaign --workdir "$TMP/w" --runs 1 --target "$TMP/t.json"
    # A config the target does not declare is bad input, naming the field.
    expect 2 "$P" run "$SRC/configs/examples/dp3_zero3_adamw.json" --target "$T/fake_crash.json"
    has "zero.stage: stage 3 is not supported"
    ;;
  deepspeed_round_trip)
    for f in "$SRC"/configs/deepspeed/*.json; do
      expect 0 "$P" import deepspeed "$f" --out "$TMP/a.json"
      expect 0 "$P" export deepspeed "$TMP/a.json" --out "$TMP/ds.json"
      expect 0 "$P" import deepspeed "$TMP/ds.json" --out "$TMP/b.json"
      cmp -s "$TMP/a.json" "$TMP/b.json" || fail "$f: import(export(import)) differs from import"
      expect 0 "$P" export megatron "$TMP/a.json"
      has "--micro-batch-size"
    done
    # The real configs with a scheduler: the schedule scaled onto the run once, then kept.
    for f in "$SRC"/configs/deepspeed/real/{hf_zero3,dse_zero3_qwen_moe,dse_autotp_hf}.json; do
      expect 0 "$P" import deepspeed "$f" --out "$TMP/a.json"
      expect 0 "$P" export deepspeed "$TMP/a.json" --out "$TMP/ds.json"
      grep -q '"scheduler"' "$TMP/ds.json" || fail "$f: export deepspeed wrote no scheduler"
      expect 0 "$P" import deepspeed "$TMP/ds.json" --out "$TMP/b.json"
      cmp -s "$TMP/a.json" "$TMP/b.json" || fail "$f: import(export(import)) differs from import"
    done
    expect 0 "$P" import deepspeed "$SRC/configs/deepspeed/zero1_bf16.json"
    has '"stage": 1'
    has '"master_weights": true'
    expect 0 "$P" import deepspeed "$SRC/configs/deepspeed/zero2_bf16_master.json"
    has '"master_weights": false'
    echo '{"zero_optimization": {"stage": 7}}' >"$TMP/bad.json"
    expect 2 "$P" import deepspeed "$TMP/bad.json"
    has "zero_optimization.stage: must be 0, 1, 2 or 3"
    ;;
  deepspeed_real_configs)
    # configs/deepspeed/real/SOURCES.md: each config imports with exactly the recorded messages and
    # result; every imported config runs clean on the built-in engine.
    n=0
    for f in "$SRC"/configs/deepspeed/real/*.json; do
      b=${f%.json}
      want=0
      grep -q '^ERROR: ' "$b.messages" && want=2
      expect $want "$P" import deepspeed "$f" --out "$TMP/imported.json"
      sed "s|$f: ||" "$TMP/out" | grep -E '^(INFO|WARNING|ERROR): ' >"$TMP/messages"
      diff -u "$b.messages" "$TMP/messages" || fail "$f: the import's messages differ from $b.messages"
      if [ "$want" = 0 ]; then
        cmp -s "$b.expect" "$TMP/imported.json" || { diff -u "$b.expect" "$TMP/imported.json"; fail "$f: the imported config differs from $b.expect"; }
        expect 0 "$P" run "$TMP/imported.json"
        has "SUMMARY: paradiff: PASS"
      fi
      n=$((n + 1))
    done
    [ "$n" -ge 7 ] || fail "only $n real configs found"
    ;;
  megatron_real_args)
    # configs/megatron/real/SOURCES.md: each argument list imports with exactly the recorded
    # messages and result, and runs clean; an exported config imports back on the shared fields.
    for f in "$SRC"/configs/megatron/real/*.args; do
      b=${f%.args}
      expect 0 "$P" import megatron "$f" --out "$TMP/imported.json"
      sed "s|$f: ||" "$TMP/out" | grep -E '^(INFO|WARNING|ERROR): ' >"$TMP/messages"
      diff -u "$b.messages" "$TMP/messages" || fail "$f: the import's messages differ from $b.messages"
      cmp -s "$b.expect" "$TMP/imported.json" || { diff -u "$b.expect" "$TMP/imported.json"; fail "$f: the imported config differs from $b.expect"; }
      expect 0 "$P" run "$TMP/imported.json"
      has "SUMMARY: paradiff: PASS"
    done
    expect 0 "$P" export megatron "$EX/dp3_zero3_adamw.json" --out "$TMP/args"
    expect 0 "$P" import megatron "$TMP/args" --out "$TMP/back.json"
    expect 0 "$P" export megatron "$TMP/back.json" --out "$TMP/args2"
    cmp -s "$TMP/args" "$TMP/args2" || { diff "$TMP/args" "$TMP/args2"; fail "export(import(export(c))) differs from export(c)"; }
    expect 2 "$P" import megatron -- --num-layers many
    has "--num-layers: must be an integer >= 1, got 'many'"
    printf -- '--hidden-size $HIDDEN\n' >"$TMP/vars.args"
    expect 2 "$P" import megatron "$TMP/vars.args"
    has 'HIDDEN: a shell variable'
    ;;
  torch_bitwise_world1)
    need_torch
    torch_bitwise "$T/torch_world1.json"
    ;;
  torch_bitwise_world1_bf16)
    # bf16 compute: paradiff's reference runs its own bf16 gemm (see Note [Fast bf16 gemm] in
    # kernels/bf16_gemm.cpp), torch 1.13 ATen's; the bits must still agree.
    need_torch
    torch_bitwise "$T/torch_world1_bf16.json"
    ;;
  torch_warm_leaks_nothing)
    # Protocol 2 (docs/TARGETS.md "Warm workers"): nothing one config does reaches the next, though
    # the ranks of each world size outlive their configs (adapters/torch/crew.py): the others run
    # at world 1 to 4, ZeRO 0 and 1, with each optimizer.
    need_torch
    warm_leaks_nothing "$SRC/adapters/torch/torch.json" "$T/torch_accumulate_dp2.json" 100 \
      "c['parallel'] = {'world': 1 + i % 4, 'dp': 1 + i % 4}; c['zero'] = {'stage': i // 4 % 2}; c['optimizer']['kind'] = ['adam', 'sgd', 'adamw'][i % 3]"
    ;;
  torch_crew_collect)
    # A crew reports the rank that failed first, not a peer whose collective failed because of it
    # (tests/targets/crew_collect.py; no torch needed).
    expect 0 /usr/bin/python3 "$T/crew_collect.py"
    has "^ok: [0-9]+ cases"
    ;;
  torch_serve_reply_order)
    # A warm worker replies only once it is done with the run dir, which paradiff then removes
    # (tests/targets/serve_reply_order.py; no torch needed).
    expect 0 /usr/bin/python3 "$T/serve_reply_order.py"
    has "^ok \(crews\): 3 replies"
    ;;
  torch_serve_tracebacks)
    # Ranks that fail together leave a whole traceback first in their run's log, which a crash's
    # signature is read from (tests/targets/serve_tracebacks.py).
    need_torch
    expect 0 /usr/bin/python3 "$T/serve_tracebacks.py" 5
    has "5 rounds: the first traceback whole"
    ;;
  torch_crew_faults)
    # A rank of a crew that raises, dies of a signal or exits, or fails to form the crew's group,
    # is the crash a forked rank's would be (its state named, from the run's own log), and the
    # configs after it run as on a new worker; two good configs in a row run on the same ranks
    # (tests/targets/crew_faults.py).
    need_torch
    derive_target "$SRC/adapters/torch/torch.json" "$TMP/faults.json" "t['command'] = ['/usr/bin/python3', '$T/crew_faults.py']"
    for s in 42 901 42 902 42 903 42; do derive_json "$T/torch_accumulate_dp2.json" "$TMP/c$s.json" "c['seed'] = $s"; done
    derive_json "$T/torch_accumulate_dp2.json" "$TMP/w3.json" "c['seed'] = 77; c['parallel'] = {'world': 3, 'dp': 3}"
    expect 3 "$P" replay "$TMP"/c{42,42,901,42,902,42,903,42}.json "$TMP/w3.json" --target "$TMP/faults.json" \
      --oracles numeric --keep-run-dirs "$TMP/keep"
    has "c901.json +crash.target.-.-.run.exit.RuntimeError-faulty"
    has "paradiff crew: rank 1 terminated with signal SIGSEGV"
    has "paradiff crew: rank 1 exited with code 4"
    has "w3.json +crash.target.-.-.run.exit.RuntimeError-init_process_group"
    has "fails=4 pass=5"
    /usr/bin/python3 - "$TMP/keep" <<'PY' || fail "a crew did not outlive its config, or a config after a fault differs"
import filecmp, glob, json, os, sys
runs = sorted((d for d in glob.glob(os.path.join(sys.argv[1], "paradiff-target-*"))
               if json.load(open(os.path.join(d, "config.json")))["seed"] == 42),
              key=lambda d: os.stat(os.path.join(d, "config.json")).st_mtime_ns)
assert len(runs) == 5, runs
pids = [sorted(l for l in open(os.path.join(d, "target.log")) if l.startswith("crew rank")) for d in runs]
assert len(pids[0]) == 2 and pids[0] == pids[1], ("the second config ran on other ranks", pids[:2])
outs = sorted(os.listdir(os.path.join(runs[0], "out")))
for d in runs[1:]:
    _, diff, errors = filecmp.cmpfiles(os.path.join(runs[0], "out"), os.path.join(d, "out"), outs, shallow=False)
    assert outs and not diff and not errors, (d, diff, errors)
print("the second run on the first one's ranks; 5 runs of seed 42 around 3 faults: %d output files identical" % len(outs))
PY
    ;;
  torch_accumulate_dp2)
    # Regression (issue 32): DDP accumulates under no_sync and reduces once per step; the twin
    # reduced every micro-step and the mirror oracle flagged 8-16 ulp at dp 2 with accumulation.
    # The target declares its structure (grad_reduction), the twin mirrors it, and the mirror
    # oracle judges the run bit for bit (not skipped) and passes, in fp32 and bf16 compute.
    need_torch
    sed 's/"lr": 0.01}/"lr": 0.01}, "precision": {"compute": "bf16"}/' "$T/torch_accumulate_dp2.json" >"$TMP/bf16.json"
    mirror_passes "$T/torch_accumulate_dp2.json"
    mirror_passes "$TMP/bf16.json"
    ;;
  torch_single_threaded_blas)
    # Regression (campaign seed 6162, minimized to world 1): Debian's OpenBLAS split the lm head's
    # backward gemm (vocab 401, hidden 52, 48 tokens) over its pool in the adapter and not in the
    # twin, 1024 ulp apart in the embedding's gradient; the adapter now runs OpenBLAS in one
    # thread, as paradiff does, and the mirror oracle judges the run bit for bit and passes.
    need_torch
    mirror_passes "$T/torch_blas_split_min.json"
    ;;
  torch_lr_schedule)
    # optimizer.schedule as a LambdaLR stepped after each update: warmup + linear decay and warmup +
    # cosine past their ends, dp 2 with accumulation; the mirror oracle judges every update bit for
    # bit (the rate of each is the reference's own) and passes.
    need_torch
    for sched in "'kind': 'warmup_linear', 'warmup_steps': 2, 'total_steps': 3, 'min_ratio': 0.0" \
                 "'kind': 'warmup_cosine', 'warmup_steps': 3, 'total_steps': 5, 'min_ratio': 0.1"; do
      derive_json "$T/torch_accumulate_dp2.json" "$TMP/s.json" "c['steps'] = 7; c['optimizer']['schedule'] = {$sched}"
      mirror_passes "$TMP/s.json"
    done
    ;;
  torch_campaign_clean)
    # Also: nothing is left in the temp dir, though the campaign's workers, killed at its end,
    # still hold warm workers (see Note [Job scratch] in fuzz/worker_pool.cpp).
    need_torch
    mkdir "$TMP/tmp"
    expect 0 env TMPDIR="$TMP/tmp" "$P" campaign --workdir "$TMP/w" --runs 16 --jobs 2 --seed 3 \
      --minimize-budget-s 0 --target "$SRC/adapters/torch/torch.json"
    has "campaign CLEAN"
    left=$(ls -A "$TMP/tmp")
    [ -z "$left" ] || fail "left in the temp dir: $left"
    ;;
  torch_params_only)
    # A target that reports only loss, its float32 norm and parameters is judged on those alone:
    # clean when right, caught when only the parameters are wrong.
    need_torch
    expect 0 "$P" run "$T/small_dp2.json" --target "$T/torch_params_only.json" --report "$TMP/r.json"
    /usr/bin/python3 - "$TMP/r.json" <<'PY' || fail "the params-only report compared unreported kinds"
import json, sys
r = json.load(open(sys.argv[1]))
kinds = sorted({c["kind"] + ("/" + c["detail"] if c.get("detail") else "") for c in r["comparisons"]})
print("compared kinds:", kinds)
sys.exit(0 if kinds == ["grad_norm", "loss", "param"] else 1)
PY
    expect 3 "$P" run "$T/small_dp2.json" --target "$T/torch_params_only_planted.json"
    has "sig=mismatch.numeric.param.embedding.optimizer "
    expect 0 "$P" campaign --workdir "$TMP/w" --runs 8 --jobs 2 --seed 11 --minimize-budget-s 0 \
      --target "$T/torch_params_only.json"
    has "campaign CLEAN"
    ;;
  torch_planted_minimized)
    need_torch
    expect 3 "$P" run "$T/small_dp2.json" --target "$SRC/adapters/torch/torch_planted.json"
    has "sig=mismatch.numeric.grad.embedding.reduction.scale"
    expect 3 "$P" minimize "$T/small_dp2.json" --target "$SRC/adapters/torch/torch_planted.json" \
      --out "$TMP/min.json" --budget 60s
    has "minimize FINDING sig=mismatch.numeric.grad"
    grep -q '"dp": 2' "$TMP/min.json" || fail "the minimized config lost dp=2"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
