#!/usr/bin/env bash
# End-to-end tests of `paradiff campaign`: clean runs, injected bugs found and replayed, worker
# crashes and hangs recorded, kill-and-resume losing and double-counting nothing, one process per
# work dir.
# Usage: campaign_test.sh PARADIFF_BINARY CASE
set -u
P=$1
CASE=$2
. "$(dirname "$0")/lib.sh"
e2e_tmp
stat_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1/stats.json" "$2"; }
# Sum over findings of meta.json's count, and the sorted signatures.
findings_of() {
  python3 - "$1" <<'PY'
import json, os, sys
d = os.path.join(sys.argv[1], "findings")
sigs = sorted(os.listdir(d)) if os.path.isdir(d) else []
total = sum(json.load(open(os.path.join(d, s, "meta.json")))["count"] for s in sigs)
print(total, " ".join(sigs))
PY
}

case $CASE in
  clean)
    expect 0 "$P" campaign --workdir "$TMP/w" --runs 24 --jobs 2 --seed 7
    has "SUMMARY: paradiff: campaign CLEAN seed=7 execs=24 findings=0"
    has "INFO: campaign elapsed=.* execs/s=.* pairs=[0-9]+/[0-9]+"
    [ "$(stat_of "$TMP/w" done_below)" = 24 ] || fail "stats.json done_below != 24"
    ls "$TMP/w/corpus/"*.json >/dev/null 2>&1 || fail "no corpus configs saved"
    ;;
  injected_found_and_replayed)
    expect 3 "$P" campaign --workdir "$TMP/w" --runs 200 --jobs 2 --seed 3 \
      --inject zero.uneven_last_shard --stop-on-first
    has "SUMMARY: paradiff: campaign FINDINGS"
    sig=$(ls "$TMP/w/findings" | head -1)
    [ -n "$sig" ] || fail "no finding stored"
    for f in config.json report.json log meta.json; do
      [ -f "$TMP/w/findings/$sig/$f" ] || fail "finding lacks $f"
    done
    expect 3 "$P" run "$TMP/w/findings/$sig/config.json"
    has "SUMMARY: paradiff: FINDING kind=[a-z-]+ sig=$sig "
    ;;
  crash_and_hang_recorded)
    expect 3 "$P" campaign --workdir "$TMP/w" --runs 16 --jobs 2 --seed 5 \
      --debug-crash-at 3 --debug-hang-at 6 --task-timeout-s 3
    has "execs=16"
    [ -f "$TMP/w/findings/crash.worker.-.-.worker-died/meta.json" ] || fail "crash not recorded"
    [ -f "$TMP/w/findings/hang.worker.-.-.timeout/meta.json" ] || fail "hang not recorded"
    ;;
  workdir_locked)
    # One process per work dir: a second campaign (or a zoo) on it exits 2 naming the holder.
    "$P" campaign --workdir "$TMP/w" --budget 60s --jobs 1 --seed 5 >"$TMP/first" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do grep -q '"pid"' "$TMP/w/lock" 2>/dev/null && break; sleep 0.1; done
    expect 2 "$P" campaign --workdir "$TMP/w" --runs 4 --seed 5
    has "ERROR: .*--workdir $TMP/w is in use by pid $pid on host .* since 20"
    expect 2 "$P" zoo run --workdir "$TMP/w" --runs 1
    has "is in use by pid $pid"
    kill -INT "$pid"; wait "$pid"
    expect 0 "$P" campaign --workdir "$TMP/w" --runs 2 --seed 5
    has "SUMMARY: paradiff: campaign CLEAN"
    grep -q "took over" "$TMP/out" && fail "a lock released on exit was reported stale"
    ;;
  kill_and_resume)
    args=(campaign --runs 64 --jobs 2 --seed 11 --inject comm.rank_dependent_bucket_order)
    expect 3 "$P" "${args[@]}" --workdir "$TMP/ref"
    "$P" "${args[@]}" --workdir "$TMP/w" >"$TMP/first" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do  # until some progress is on disk, then kill -9
      [ -f "$TMP/w/stats.json" ] && [ "$(stat_of "$TMP/w" execs)" -ge 8 ] && break
      sleep 0.1
    done
    kill -9 "$pid"; wait "$pid" 2>/dev/null
    [ "$(stat_of "$TMP/w" done_below)" -lt 64 ] || fail "the campaign finished before the kill"
    expect 3 "$P" "${args[@]}" --workdir "$TMP/w"
    has "resume_from=[1-9]"
    has "took over the stale lock of pid $pid on host "
    [ "$(stat_of "$TMP/w" execs)" = 64 ] || fail "resumed execs $(stat_of "$TMP/w" execs) != 64"
    [ "$(findings_of "$TMP/w")" = "$(findings_of "$TMP/ref")" ] ||
      fail "resumed findings '$(findings_of "$TMP/w")' != uninterrupted '$(findings_of "$TMP/ref")'"
    # The killed campaign's workers, ended by themselves, removed their scratch dirs (see Note
    # [Job scratch] in fuzz/worker_pool.cpp).
    left=$(ls -d "$TMP"/paradiff-job-* 2>/dev/null)
    [ -z "$left" ] || fail "scratch dirs left: $left"
    ;;
  group_signal_resumes)
    # A SIGTERM to the campaign's whole process group (what `timeout` and a Ctrl-C do) ends its
    # workers too: their tasks are not findings, the campaign stops as interrupted, and a resume
    # checks what was left.
    args=(campaign --workdir "$TMP/w" --runs 40 --jobs 2 --seed 7)
    setsid "$P" "${args[@]}" >"$TMP/first" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do  # until both workers run tasks, then the group's SIGTERM
      [ -f "$TMP/w/stats.json" ] && [ "$(stat_of "$TMP/w" execs)" -ge 2 ] && break
      sleep 0.1
    done
    kill -TERM -- "-$pid"; wait "$pid"
    grep -q "campaign CLEAN .*(interrupted; rerun the same command to resume)" "$TMP/first" ||
      fail "no interrupted CLEAN summary: $(tail -3 "$TMP/first")"
    [ -d "$TMP/w/findings" ] && [ -n "$(ls "$TMP/w/findings")" ] &&
      fail "a worker ended by the group's SIGTERM was recorded: $(ls "$TMP/w/findings")"
    [ "$(stat_of "$TMP/w" done_below)" -lt 40 ] || fail "the campaign finished before the signal"
    expect 0 "$P" "${args[@]}"
    has "SUMMARY: paradiff: campaign CLEAN seed=7 execs=40 findings=0"
    ;;
  inconclusive_kept)
    # A seed corpus of one config whose training diverges (SGD at lr 1e30): its checks are
    # inconclusive, never findings, and each reason is kept like a finding and replays the same.
    # Seed 9 is one whose first family starts from the seed corpus (ConfigAt).
    mkdir "$TMP/seeds"
    python3 - "$(dirname "$0")/../../corpus/seed/dp4_zero2.json" "$TMP/seeds/diverging.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["optimizer"].update(kind="sgd", lr=1e30, momentum=0.0)
c["steps"], c["clip_grad_norm"] = 4, 0.0
json.dump(c, open(sys.argv[2], "w"))
PY
    expect 0 "$P" campaign --workdir "$TMP/w" --runs 8 --jobs 2 --seed 9 --corpus "$TMP/seeds" \
      --minimize-budget-s 0
    has "SUMMARY: paradiff: campaign CLEAN seed=9 execs=8 findings=0 .*inconclusive=[1-9]"
    d="$TMP/w/inconclusive/inconclusive.numeric.-.-.divergence"
    has "INFO: inconclusive $d"
    for f in config.json report.json log meta.json; do [ -f "$d/$f" ] || fail "reason lacks $f"; done
    [ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['count'])" "$d/meta.json")" \
      = "$(stat_of "$TMP/w" inconclusive)" ] || fail "meta.json count != stats.json inconclusive"
    grep -q "diverged" "$d/log" || fail "the reason's log does not say why"
    expect 0 "$P" replay "$d"
    has "^pass +yes .*inconclusive.numeric.-.-.divergence"
    expect 0 "$P" replay "$d/config.json"
    has "^pass +- .* pass \\(inconclusive: inconclusive.numeric.-.-.divergence\\)"
    has "SUMMARY: paradiff: replay CLEAN configs=1 .* pass=1 invalid=0 unexpected=0 inconclusive=1"
    expect 0 "$P" report "$TMP/w" --html "$TMP/w.html"
    grep -q "Inconclusive (1 reasons)" "$TMP/w.html" || fail "the HTML report lacks the reason"
    ;;
  bad_options)
    expect 2 "$P" campaign --workdir "$TMP/w"; has "--budget"
    expect 2 "$P" campaign --workdir "$TMP/w" --budget 5parsecs; has "--budget=5parsecs"
    expect 2 "$P" campaign --workdir "$TMP/w" --runs 4 --inject nope; has "unknown fault"
    expect 0 "$P" campaign --workdir "$TMP/w" --runs 2 --seed 1
    expect 2 "$P" campaign --workdir "$TMP/w" --runs 4 --seed 2; has "differs from the work dir"
    ;;
  feedback_reproducible)
    # Behaviour feedback (fuzz/feedback.h) steers generation 1 by generation 0's results: the same
    # seed keeps the same parents at any --jobs and across a kill -9 and a resume, and feedback
    # changes some configs (a schedule that ignored it would show nothing here).
    feedback_of() { python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['feedback'], sort_keys=True))" "$1/stats.json"; }
    args=(campaign --runs 128 --seed 13 --minimize-budget-s 0)
    expect 0 "$P" "${args[@]}" --jobs 2 --workdir "$TMP/a"
    has "parents=[1-9]"
    "$P" "${args[@]}" --jobs 1 --workdir "$TMP/b" >"$TMP/first" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do  # into generation 1, then kill -9
      [ -f "$TMP/b/stats.json" ] && [ "$(stat_of "$TMP/b" execs)" -ge 70 ] && break
      sleep 0.1
    done
    kill -9 "$pid"; wait "$pid" 2>/dev/null
    [ "$(stat_of "$TMP/b" done_below)" -lt 128 ] || fail "the campaign finished before the kill"
    expect 0 "$P" "${args[@]}" --jobs 2 --workdir "$TMP/b"
    has "resume_from=[1-9]"
    [ "$(feedback_of "$TMP/a")" = "$(feedback_of "$TMP/b")" ] ||
      fail "the parents differ between --jobs 2 and --jobs 1 killed and resumed"
    expect 0 "$P" "${args[@]}" --jobs 2 --workdir "$TMP/c" --no-feedback
    has "parents=0"
    expect 2 "$P" "${args[@]}" --jobs 2 --workdir "$TMP/c"; has "differs from the work dir"
    [ "$(ls "$TMP/a/corpus" | sort)" != "$(ls "$TMP/c/corpus" | sort)" ] ||
      fail "feedback changed no config of generation 1"
    ;;
  known_baseline)
    # --baseline: a known signature is recorded as any finding but neither minimized nor a
    # failure, and does not stop --stop-on-first; an unknown one still fails the campaign.
    args=(campaign --runs 8 --jobs 2 --seed 3 --inject zero.uneven_last_shard)
    expect 3 "$P" "${args[@]}" --workdir "$TMP/a" --minimize-budget-s 0
    sig=$(ls "$TMP/a/findings" | head -1)
    [ -n "$sig" ] || fail "no finding to make a baseline of"
    n=$(ls "$TMP/a/findings" | wc -l)
    ls "$TMP/a/findings" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))' >"$TMP/known.json"
    # The same seed draws the same configs: every signature is known, so nothing stops or fails.
    expect 0 "$P" "${args[@]}" --workdir "$TMP/b" --baseline "$TMP/known.json" --stop-on-first
    has "SUMMARY: paradiff: campaign CLEAN seed=3 execs=8 findings=[1-9][0-9]* unique=$n new=$n known=$n "
    has "INFO: new finding sig=$sig \\(known: in the baseline\\)"
    has "INFO: not minimizing $sig: known"
    [ -f "$TMP/b/findings/$sig/config.json" ] || fail "the known finding was not recorded"
    [ ! -f "$TMP/b/findings/$sig/minimize.json" ] || fail "the known finding was minimized"
    printf '["other.signature"]\n' >"$TMP/other.json"
    expect 3 "$P" "${args[@]}" --workdir "$TMP/c" --baseline "$TMP/other.json" --minimize-budget-s 0 --stop-on-first
    has "campaign FINDINGS .* known=0 "
    printf '{"nope": 1}\n' >"$TMP/bad.json"
    expect 2 "$P" "${args[@]}" --workdir "$TMP/d" --baseline "$TMP/bad.json"; has "--baseline="
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
