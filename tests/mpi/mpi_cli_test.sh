#!/usr/bin/env bash
# `paradiff run --backend mpi` end to end: verdicts, exit codes and options of the mpi backend.
# Usage: mpi_cli_test.sh PARADIFF_BINARY SOURCE_DIR CASE
set -u
. "$(dirname "$0")/../e2e/lib.sh"
e2e_init "$@"

case $CASE in
  run_np2)  # the backend from the config file
    sed 's/"backend": "local"/"backend": "mpi"/' "$EX/dp2_bf16_accum.json" >"$TMP/mpi.json"
    expect 0 "$P" run "$TMP/mpi.json" --report "$TMP/r.json"
    has "world=2 "; has "SUMMARY: paradiff: PASS"
    grep -q '"signature": "pass"' "$TMP/r.json" || fail "report lacks the pass signature"
    ;;
  run_np4)  # the backend from the command line
    expect 0 "$P" run "$EX/dp4_zero2.json" --backend mpi; has "world=4 "; has "SUMMARY: paradiff: PASS"
    ;;
  run_finding)
    expect 3 "$P" run "$EX/dp3_zero3_adamw.json" --backend mpi --inject zero.uneven_last_shard
    has "SUMMARY: paradiff: FINDING kind=invariant sig=invariant.tiling"
    ;;
  cross_backend)  # run --cross-backend: tensor and pipeline parallel, bitwise local == mpi
    expect 0 "$P" run "$SRC/corpus/seed/tp2_pp2_dp2_bf16.json" --cross-backend --report "$TMP/r.json"
    has "SUMMARY: paradiff: PASS"
    python3 - "$TMP/r.json" <<'PY' || fail "the report does not show the cross_backend oracle passing"
import json, sys
r = json.load(open(sys.argv[1]))
assert [o["status"] for o in r["oracles"] if o["name"] == "cross_backend"] == ["pass"], r["oracles"]
PY
    ;;
  checkpoint)  # a checkpointed run: one mpirun job per phase, the reload into another layout
    C="$SRC/corpus/regression/clean_bf16_compute_dp3_zero2_step0_grad.json"  # dp 3 -> dp 2, ZeRO 1
    expect 0 "$P" run "$C" --cross-backend --report "$TMP/r.json"; has "SUMMARY: paradiff: PASS"
    python3 - "$TMP/r.json" <<'PY' || fail "the report does not show the cross_backend oracle passing"
import json, sys
r = json.load(open(sys.argv[1]))
assert [o["status"] for o in r["oracles"] if o["name"] == "cross_backend"] == ["pass"], r["oracles"]
PY
    # A loader that drops each saving rank's uneven tail: the mpi ranks really load what they saved,
    # and the finding is the local backend's to the step, phase and tensor.
    F="$SRC/corpus/regression/ckpt_reshard_drops_tail.json"
    expect 3 "$P" run "$F"; local_summary=$(grep '^SUMMARY:' "$TMP/out")
    expect 3 "$P" run "$F" --backend mpi; has "sig=mismatch.numeric"
    [ "$(grep '^SUMMARY:' "$TMP/out")" = "$local_summary" ] || fail "mpi and local findings differ"
    ;;
  regression_corpus)  # every regression config on both backends, bitwise; verdicts unchanged
    expect 3 "$P" replay "$SRC/corpus/regression" --oracles default,cross_backend
    has "SUMMARY: paradiff: replay FAILING configs=[0-9]+ same=[1-9][0-9]* different=0 fails=0 pass=[1-9][0-9]* invalid=0 unexpected=0"
    ;;
  campaign_distributed)  # workers on every rank, one work dir, one progress stream and summary
    expect 3 mpirun --bind-to none -np 3 "$P" campaign --distributed --workdir "$TMP/w" --runs 16 \
      --jobs 1 --seed 5 --inject zero.uneven_last_shard --minimize-budget-s 0 --corpus "$SRC/corpus/seed"
    has "distributed campaign over 3 MPI ranks"
    [ "$(grep -c '^SUMMARY: paradiff: campaign FINDINGS' "$TMP/out")" -eq 1 ] || fail "expected one summary"
    [ "$(grep -c 'INFO: campaign workdir=' "$TMP/out")" -eq 1 ] || fail "expected one campaign start line"
    has "execs=16 "
    has "executions by rank: rank0=[0-9]+ rank1=[1-9][0-9]* rank2=[1-9]"
    [ -f "$(ls -d "$TMP"/w/findings/*/ | head -1)/config.json" ] || fail "no finding stored in rank 0's work dir"
    ;;
  campaign_backend_mpi)  # every config under the mpirun executor
    expect 0 "$P" campaign --backend mpi --workdir "$TMP/w" --runs 3 --jobs 1 --seed 2 --minimize-budget-s 0
    has "SUMMARY: paradiff: campaign CLEAN seed=2 execs=3 "
    grep -l '"backend": "mpi"' "$TMP"/w/corpus/*.json >/dev/null || fail "the corpus configs are not on the mpi backend"
    grep -L '"backend": "mpi"' "$TMP"/w/corpus/*.json | grep -q . && fail "a corpus config is not on the mpi backend"
    expect 2 "$P" campaign --backend nccl --workdir "$TMP/x" --runs 1; has "--backend must be local or mpi"
    ;;
  cli_options)
    expect 2 "$P" run "$EX/dp4_zero2.json" --backend nccl; has "--backend must be local or mpi"
    sed 's/"backend": "local"/"backend": "nccl"/' "$EX/dp4_zero2.json" >"$TMP/nccl.json"
    expect 2 "$P" run "$TMP/nccl.json"; has "backend=nccl"
    expect 0 "$P" --help; lacks "^  rank"
    expect 2 "$P" rank "$EX/dp4_zero2.json"; has "--obs-dir"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
