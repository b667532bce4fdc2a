#!/usr/bin/env bash
# `paradiff run --backend mpi` end to end: verdicts, exit codes and options of the mpi backend.
# Usage: mpi_cli_test.sh PARADIFF_BINARY SOURCE_DIR CASE
set -u
P=$1
SRC=$2
CASE=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
EX=$SRC/configs/examples
fail() { echo "FAIL: $CASE: $*"; exit 1; }
expect() {
  local want=$1; shift
  "$@" >"$TMP/out" 2>&1
  local got=$?
  [ "$got" -eq "$want" ] || { cat "$TMP/out"; fail "'$*' exited $got, expected $want"; }
}
has() { grep -qE -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output lacks /$1/"; }; }
lacks() { ! grep -qE -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output has /$1/"; }; }

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
