#!/usr/bin/env bash
# End-to-end tests of the `paradiff` command: exit codes, messages, reports, injected faults.
# Usage: cli_test.sh PARADIFF_BINARY SOURCE_DIR CASE
set -u
. "$(dirname "$0")/lib.sh"
e2e_init "$@"

# A config derived from an example with sed edits: derive EXAMPLE OUT 's/../../' ...
derive() {
  local src=$1 out=$2; shift 2
  cp "$EX/$src" "$out"
  for e in "$@"; do sed -i "$e" "$out"; done
}

case $CASE in
  help)
    expect 0 "$P" --help; has "exit codes: 0 pass, 1 internal error, 2 bad input, 3 finding"
    expect 0 "$P" run --help; has "--inject"
    expect 0 "$P" version; has "^paradiff [0-9]+\.[0-9]+"
    ;;
  usage_errors)
    expect 2 "$P" frobnicate; has "unknown subcommand"
    expect 2 "$P" run; has "exactly one CONFIG"
    expect 2 "$P" run "$EX/dp4_zero2.json" --no-such-flag; has "ERROR:"
    expect 2 "$P" validate; has "at least one CONFIG"
    expect 2 "$P" zoo run --runs 1 --workdir "$TMP/zoo" --only no.such.switch; has "not a zoo switch"
    ;;
  domain)
    # `paradiff domain`: shares, blind spots and a SUMMARY; the JSON report; bad options exit 2.
    expect 0 "$P" domain --runs 400 --seed 3 --json "$TMP/d.json"
    has "SUMMARY: paradiff: domain seed=3 samples=400 pairs=[0-9]+/[0-9]+ blind_spots=[0-9]+ unreached=[0-9]+"
    has "^  zero=3 +[0-9]+"
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["samples"] == 400 and r["values"]' "$TMP/d.json" || fail "domain --json"
    expect 2 "$P" domain --runs 0; has "runs must be >= 1"
    ;;
  validate_examples)
    expect 0 "$P" validate "$EX"/*.json; has "SUMMARY: paradiff: validate [0-9]+ valid, 0 invalid"
    ;;
  validate_invalid)
    expect 2 "$P" validate "$SRC/configs/invalid/malformed.json"; has "malformed JSON"
    expect 2 "$P" validate "$SRC/configs/invalid/tp_not_dividing_heads.json"; has "parallel.tp=3"
    expect 2 "$P" validate "$SRC/configs/invalid/unknown_key.json"; has "unknown key"
    expect 2 "$P" validate "$TMP/missing.json"; has "missing.json"
    derive dp4_zero2.json "$TMP/big.json" 's/"layers": 2/"layers": 500/'
    expect 2 "$P" validate "$TMP/big.json"; has "model.layers=500 exceeds"
    ;;
  run_pass_and_report)
    expect 0 "$P" run "$EX/dp3_zero3_adamw.json" --report "$TMP/r.json"
    has "SUMMARY: paradiff: PASS"
    has "^ +1 +[0-9.]+"  # the per-step table has step 1
    grep -q '"signature": "pass"' "$TMP/r.json" || fail "report lacks the pass signature"
    grep -q '"comparisons"' "$TMP/r.json" || fail "report lacks comparisons"
    grep -q '"seed": 1234' "$TMP/r.json" || fail "report lacks the seed"
    ;;
  run_unsupported_or_bad_inject)
    expect 2 "$P" run "$EX/dp4_zero2.json" --inject no.such.fault; has "faults"
    derive dp4_zero2.json "$TMP/nccl.json" 's/"backend": "local"/"backend": "nccl"/'
    expect 2 "$P" run "$TMP/nccl.json"; has "backend=nccl"
    ;;
  fault_zero_uneven_last_shard)
    expect 3 "$P" run "$EX/dp3_zero3_adamw.json" --inject zero.uneven_last_shard --report "$TMP/r.json"
    has "SUMMARY: paradiff: FINDING kind=invariant sig=invariant.tiling"
    grep -q '"kind": "invariant"' "$TMP/r.json" || fail "report lacks the finding"
    derive dp4_zero2.json "$TMP/even.json"  # 19360 parameters divide by 4
    expect 0 "$P" run "$TMP/even.json" --inject zero.uneven_last_shard; has "PASS"
    ;;
  fault_gas_overwrite_grad)
    derive dp4_zero2.json "$TMP/acc.json" 's/"accumulation_steps": 1/"accumulation_steps": 3/'
    expect 3 "$P" run "$TMP/acc.json" --inject gas.overwrite_grad
    has "SUMMARY: paradiff: FINDING kind=mismatch sig=mismatch.numeric.grad"
    has "step=0 phase=gradient"
    expect 0 "$P" run "$EX/dp4_zero2.json" --inject gas.overwrite_grad; has "PASS"
    ;;
  fault_comm_rank_dependent_bucket_order)
    expect 3 "$P" run "$EX/dp4_zero2.json" --inject comm.rank_dependent_bucket_order
    has "SUMMARY: paradiff: FINDING"
    derive dp4_zero2.json "$TMP/onebucket.json" 's/"bucket_elems": [0-9]*/"bucket_elems": 1000000/'
    expect 0 "$P" run "$TMP/onebucket.json" --inject comm.rank_dependent_bucket_order; has "PASS"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
