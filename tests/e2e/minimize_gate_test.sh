#!/usr/bin/env bash
# End-to-end tests of `paradiff minimize`, `replay`, `gate`, `report` and `run --html`: exit codes,
# the printed steps and reproduce line, replay classes, the regression corpus, JUnit XML that
# parses, self-contained HTML with its plots, and campaign findings minimized beside the original.
# Usage: minimize_gate_test.sh PARADIFF_BINARY SOURCE_DIR CASE
set -u
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
REG=$SRC/corpus/regression
# self_contained FILE: HTML with inline plots and nothing fetched from elsewhere.
self_contained() {
  grep -q "<svg" "$1" || fail "$1 has no <svg> plot"
  no_external "$1"
}
no_external() {
  grep -q "</html>" "$1" || fail "$1 is not a whole HTML page"
  if grep -qiE 'https?://|<script|src=|url\(|<link|@import' "$1"; then fail "$1 references something external"; fi
}
junit_parses() {
  python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag == "testsuites" and r.findall(".//testcase"), r.tag' "$1" ||
    fail "$1 is not valid JUnit XML with test cases"
}
# links_resolve FILE MIN: at least MIN in-page links, and every one has its target id.
links_resolve() {
  python3 -c '
import re, sys
h = open(sys.argv[1]).read()
links, ids = re.findall(r"href=\"#([^\"]+)\"", h), set(re.findall(r"id=\"([^\"]+)\"", h))
assert len(links) >= int(sys.argv[2]), links
assert all(l in ids for l in links), [l for l in links if l not in ids]' "$1" "$2" || fail "$1: broken or missing in-page links"
}
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
sig_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["signature"])' "$1"; }

case $CASE in
  minimize_cli)
    expect 3 "$P" minimize "$SRC/configs/examples/dp3_zero3_adamw.json" --inject zero.uneven_last_shard \
      --out "$TMP/min.json"
    has "^STEP: check [0-9]+: "
    has "1-minimal"
    has "^INFO: reproduce: paradiff run $TMP/min.json"
    has "SUMMARY: paradiff: minimize FINDING sig=invariant.tiling.grad.norm.gradient .* complete=yes"
    grep -q '"zero.uneven_last_shard"' "$TMP/min.json" || fail "the minimized config lost its fault switch"
    expect 3 "$P" run "$TMP/min.json"
    has "sig=invariant.tiling.grad.norm.gradient "
    expect 0 "$P" minimize "$SRC/configs/examples/dp4_zero2.json" --out "$TMP/none.json"
    has "nothing to minimize"
    [ ! -e "$TMP/none.json" ] || fail "a passing config was written as minimized"
    expect 2 "$P" minimize "$SRC/configs/examples/dp4_zero2.json"; has "--out"
    expect 2 "$P" minimize "$SRC/configs/invalid/unknown_key.json" --out "$TMP/x.json"; has "unknown key"
    expect 2 "$P" minimize "$SRC/configs/examples/dp4_zero2.json" --out "$TMP/x.json" --inject nope
    ;;
  replay_categories)
    mkdir -p "$TMP/c"
    cp "$REG/gas_overwrite_grad.json" "$REG/gas_overwrite_grad.expect.json" "$TMP/c/"
    cp "$REG/gas_overwrite_grad.json" "$TMP/c/other.json"
    echo '{"signature": "invariant.tiling.grad.norm.gradient"}' >"$TMP/c/other.expect.json"
    cp "$REG/zero_uneven_last_shard.json" "$TMP/c/plain_bug.json"
    cp "$SRC/configs/examples/dp4_zero2.json" "$TMP/c/clean.json"
    cp "$SRC/configs/invalid/tp_not_dividing_heads.json" "$TMP/c/invalid.json"
    expect 3 "$P" replay "$TMP/c"
    has "^same +yes .*gas_overwrite_grad.json +mismatch\."
    has "^different +NO .*other.json +mismatch\..* \(expected invariant\.tiling"
    has "^fails +- .*plain_bug.json +invariant\.tiling"
    has "^pass +- .*clean.json +pass"
    has "^invalid +- .*invalid.json +invalid"
    has "SUMMARY: paradiff: replay FAILING configs=5 same=1 different=1 fails=1 pass=1 invalid=1 unexpected=1"
    expect 0 "$P" replay "$TMP/c/clean.json" "$TMP/c/invalid.json"
    has "SUMMARY: paradiff: replay CLEAN configs=2 "
    expect 2 "$P" replay "$TMP/missing.json"; has "no such file"
    expect 2 "$P" replay
    ;;
  regression_corpus)
    n=$(ls "$REG"/*.json | grep -vc '\.expect\.json$')
    e=$(ls "$REG"/*.expect.json | wc -l)
    [ "$n" -ge 6 ] && [ "$n" = "$e" ] || fail "corpus/regression: $n configs, $e expectation files"
    for f in "$REG"/*.json; do
      case $f in *.expect.json) continue ;; esac
      [ "$(sig_of "${f%.json}.expect.json")" = pass ] || grep -q '"faults": \[$' "$f" ||
        fail "$f expects a finding but turns on no fault switch"
    done
    expect 3 "$P" replay "$REG"
    has "SUMMARY: paradiff: replay FAILING configs=$n same=[1-9][0-9]* different=0 fails=0 pass=[1-9][0-9]* invalid=0 unexpected=0"
    ;;
  gate_exit_codes)
    expect 0 "$P" gate --suite "$SRC/configs/gate" --regression "$REG" --junit "$TMP/g.xml" \
      --json "$TMP/g.json" --html "$TMP/g.html"
    has "SUMMARY: paradiff: gate PASSED cases=[0-9]+ passed=[0-9]+ failed=0 "
    junit_parses "$TMP/g.xml"
    self_contained "$TMP/g.html"
    [ "$(json_field "$TMP/g.json" ok)" = True ] || fail "gate JSON ok != true"
    # A suite config that shows a finding fails the gate, unless its signature is in the baseline.
    mkdir -p "$TMP/suite"
    cp "$SRC/configs/gate/dp4_zero2.json" "$TMP/suite/"
    cp "$REG/zero_uneven_last_shard.json" "$TMP/suite/bug.json"
    expect 3 "$P" gate --suite "$TMP/suite" --junit "$TMP/f.xml" --json "$TMP/f.json" --html "$TMP/f.html"
    has "SUMMARY: paradiff: gate FAILED cases=2 passed=1 failed=1 known=0"
    junit_parses "$TMP/f.xml"
    grep -q '<failure message="expected pass, got invariant.tiling.grad.norm.gradient"' "$TMP/f.xml" ||
      fail "JUnit XML lacks the failure"
    self_contained "$TMP/f.html"
    links_resolve "$TMP/f.html" 2
    echo '["invariant.tiling.grad.norm.gradient"]' >"$TMP/baseline.json"
    expect 0 "$P" gate --suite "$TMP/suite" --baseline "$TMP/baseline.json" --junit "$TMP/k.xml"
    has "SUMMARY: paradiff: gate PASSED cases=2 passed=1 failed=0 known=1"
    junit_parses "$TMP/k.xml"
    # The previous gate's JSON works as a baseline too.
    expect 0 "$P" gate --suite "$TMP/suite" --baseline "$TMP/f.json"
    echo '{"nope": 1}' >"$TMP/bad_baseline.json"
    expect 2 "$P" gate --suite "$TMP/suite" --baseline "$TMP/bad_baseline.json"; has "--baseline"
    expect 2 "$P" gate --suite "$TMP/missing"; has "not a directory"
    expect 2 "$P" gate; has "--suite"
    expect 2 "$P" gate --suite "$TMP/suite" --budget 5parsecs; has "--budget"
    ;;
  gate_with_campaign)
    mkdir -p "$TMP/suite"
    cp "$SRC/configs/gate/dp1_fp32_adamw.json" "$TMP/suite/"
    "$P" gate --suite "$TMP/suite" --budget 3s --jobs 2 --seed 5 --workdir "$TMP/w" --json "$TMP/g.json" \
      --html "$TMP/g.html" --junit "$TMP/g.xml" >"$TMP/out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { tail -30 "$TMP/out"; fail "gate with a campaign exited $rc"; }
    has "SUMMARY: paradiff: gate (PASSED|FAILED) .* campaign=$TMP/w "
    [ -f "$TMP/w/stats.json" ] || fail "no campaign work dir"
    python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["campaign"]; assert c["execs"] > 0, c' "$TMP/g.json" ||
      fail "gate JSON lacks the campaign"
    junit_parses "$TMP/g.xml"
    self_contained "$TMP/g.html"
    ;;
  campaign_minimize_report)
    expect 3 "$P" campaign --workdir "$TMP/w" --runs 2 --jobs 2 --seed 11 \
      --inject comm.rank_dependent_bucket_order --minimize-budget-s 20
    has "INFO: minimized .*1-minimal"
    sig=$(ls "$TMP/w/findings" | head -1)
    d=$TMP/w/findings/$sig
    [ -f "$d/minimized.json" ] || fail "no minimized.json beside the finding"
    [ "$(json_field "$d/minimize.json" status)" = minimized ] || fail "minimize.json status"
    expect 3 "$P" run "$d/minimized.json"
    has "sig=$sig "
    python3 -c 'import json,sys; h = json.load(open(sys.argv[1]))["history"]; assert len(h) >= 1 and "execs_per_s" in h[-1], h' \
      "$TMP/w/stats.json" || fail "stats.json lacks the history"
    expect 3 "$P" replay "$TMP/w"
    has "same=[1-9][0-9]* different=0 fails=0 pass=0 invalid=0 unexpected=0"
    expect 0 "$P" report "$TMP/w" --html "$TMP/w.html"
    self_contained "$TMP/w.html"
    links_resolve "$TMP/w.html" 2
    grep -q "Findings over time" "$TMP/w.html" || fail "no history plot"
    expect 0 "$P" report "$d/report.json" --html "$TMP/r.html"
    no_external "$TMP/r.html"  # a collective mismatch stops the run before any plotted quantity
    grep -q "$sig" "$TMP/r.html" || fail "the report page lacks the signature"
    expect 2 "$P" report "$TMP/nowhere" --html "$TMP/x.html"
    # --minimize-budget-s 0 turns minimization off.
    expect 3 "$P" campaign --workdir "$TMP/w0" --runs 2 --jobs 2 --seed 11 \
      --inject comm.rank_dependent_bucket_order --minimize-budget-s 0
    ! ls "$TMP"/w0/findings/*/minimized.json >/dev/null 2>&1 || fail "minimized with a budget of 0"
    ;;
  run_html)
    expect 3 "$P" run "$REG/gas_overwrite_grad.json" --html "$TMP/r.html" --report "$TMP/r.json"
    self_contained "$TMP/r.html"
    [ "$(grep -o '<svg' "$TMP/r.html" | wc -l)" -ge 4 ] || fail "run --html lacks the plots"
    grep -q "Error / bound per tensor" "$TMP/r.html" || fail "no error / bound plot"
    grep -q "Memory per rank" "$TMP/r.html" || fail "no memory plot"
    expect 0 "$P" run "$SRC/configs/gate/dp8_zero3_bf16.json" --html "$TMP/p.html"
    self_contained "$TMP/p.html"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
