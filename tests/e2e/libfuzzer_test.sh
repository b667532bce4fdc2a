#!/usr/bin/env bash
# End-to-end tests of the libFuzzer target (fuzz/libfuzzer_target.cpp, docs/FUZZING.md): a short
# clean run exits 0 with no artifact; an injected bug-zoo switch is found, leaves a crash artifact
# (readable JSON) and a report, the artifact reproduces with the switch and passes without it, and
# -minimize_crash=1 makes it smaller; -merge=1 plus the pruning recipe keeps only fuzzable configs;
# an unknown switch is bad input. Cases parse / parse_planted run the parser target instead
# (F = paradiff_parse_fuzz): clean on 20 000 inputs, and its planted bug caught.
# Usage: libfuzzer_test.sh FUZZ_TARGET SOURCE_DIR CASE
set -u
F=$1
SRC=$2
CASE=$3
. "$(dirname "$0")/lib.sh"
e2e_tmp
is_json() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" || fail "$1 is not JSON"; }

mkdir -p "$TMP/corpus" "$TMP/art"
cp "$SRC"/corpus/seed/*.json "$TMP/corpus/"
COMMON=(-rss_limit_mb=4096 -timeout=60 -dict="$SRC/fuzz/fuzz.dict" -artifact_prefix="$TMP/art/")

case $CASE in
  clean)
    expect 0 "$F" "${COMMON[@]}" -seed=1 -runs=60 "$TMP/corpus"
    has "INFO: paradiff_fuzz_target inject=-"
    has "Done 60 runs"
    lacks "SUMMARY: paradiff: FINDING"
    [ -z "$(ls "$TMP/art")" ] || fail "artifacts in a clean run: $(ls "$TMP/art")"
    # New corpus entries are mostly written configs (clang 14's libFuzzer also keeps byte-level
    # mutations that were rejected but covered a new parser path: docs/FUZZING.md).
    configs=0
    for f in "$TMP"/corpus/*; do
      python3 -c 'import json, sys; assert "model" in json.load(open(sys.argv[1]))' "$f" 2>/dev/null && configs=$((configs + 1))
    done
    [ "$configs" -ge 12 ] || fail "only $configs configs in the corpus after 60 runs"
    ;;
  injected_found)
    expect nonzero "$F" "${COMMON[@]}" -seed=1 -runs=400 -paradiff_inject=zero.uneven_last_shard "$TMP/corpus"
    has "SUMMARY: paradiff: FINDING kind=[a-z-]+ sig=[^ ]+ "
    has "deadly signal"
    crash=$(ls "$TMP"/art/crash-* 2>/dev/null | head -1)
    [ -n "$crash" ] || fail "no crash artifact"
    is_json "$crash"
    report=$(ls "$TMP"/art/paradiff-finding-*.json 2>/dev/null | head -1)
    [ -n "$report" ] || fail "no finding report"
    is_json "$report"
    grep -q '"zero.uneven_last_shard"' "$report" || fail "the report's config lacks the injected switch"
    # The artifact reproduces with the switch and is a passing config without it.
    mkdir -p "$TMP/art2"
    expect nonzero "$F" -rss_limit_mb=4096 -artifact_prefix="$TMP/art2/" -paradiff_inject=zero.uneven_last_shard "$crash"
    has "SUMMARY: paradiff: FINDING"
    expect 0 "$F" -rss_limit_mb=4096 "$crash"
    lacks "SUMMARY: paradiff: FINDING"
    # -minimize_crash=1 shrinks it (shrink steps, written in the sparse form) and it still crashes.
    expect 0 "$F" -rss_limit_mb=4096 -minimize_crash=1 -runs=40 -artifact_prefix="$TMP/art2/" \
      -paradiff_inject=zero.uneven_last_shard -exact_artifact_path="$TMP/min.json" "$crash"
    has "CRASH_MIN: failed to minimize beyond"
    is_json "$TMP/min.json"
    [ "$(wc -c <"$TMP/min.json")" -lt "$(wc -c <"$crash")" ] || fail "the minimized input is not smaller"
    expect nonzero "$F" -rss_limit_mb=4096 -artifact_prefix="$TMP/art2/" -paradiff_inject=zero.uneven_last_shard "$TMP/min.json"
    has "SUMMARY: paradiff: FINDING"
    ;;
  merge)
    # libFuzzer 14's merge ignores the -1 of rejected inputs; -paradiff_explain=1 names them, and
    # the pruning recipe of docs/FUZZING.md removes them.
    mkdir -p "$TMP/merged"
    printf 'not json' >"$TMP/corpus/garbage"
    printf '{"steps": 64}' >"$TMP/corpus/too_big.json"
    expect 0 "$F" "${COMMON[@]}" -merge=1 "$TMP/merged" "$TMP/corpus"
    has "MERGE-OUTER: successful"
    "$F" -rss_limit_mb=4096 -detect_leaks=0 -paradiff_explain=1 "$TMP"/merged/* 2>&1 |
      awk '/^Running: /{f=$2} /^INFO: paradiff: REJECTED/{print f}' | sort -u | xargs -r rm --
    n=$(ls "$TMP/merged" | wc -l)
    [ "$n" -ge 5 ] || fail "merge kept $n configs, expected the fuzzable seeds"
    for f in "$TMP"/merged/*; do is_json "$f"; done
    if grep -lqE 'not json|"steps": 64' "$TMP"/merged/*; then fail "an invalid or too big input survived"; fi
    ;;
  bad_flag)
    expect 2 "$F" -runs=1 -paradiff_inject=no.such_switch "$TMP/corpus"
    has "ERROR: paradiff: -paradiff_inject: unknown fault switch 'no.such_switch'"
    expect 2 "$F" -runs=1 -paradiff_oracles=nope "$TMP/corpus"
    has "ERROR: paradiff: -paradiff_oracles:"
    ;;
  parse)
    # The parser / validator target (fuzz/parse_fuzz_target.cpp): F is paradiff_parse_fuzz.
    expect 0 "$F" -seed=1 -runs=20000 -timeout=10 -rss_limit_mb=2048 -dict="$SRC/fuzz/fuzz.dict" \
      -artifact_prefix="$TMP/art/" "$TMP/corpus"
    has "Done 20000 runs"
    lacks "property broken"
    [ -z "$(ls "$TMP/art")" ] || fail "artifacts in a clean run: $(ls "$TMP/art")"
    ;;
  parse_planted)
    # Its planted bug: every re-read config has another seed, so a valid seed config breaks the
    # round-trip property at once.
    expect nonzero "$F" -runs=10 -artifact_prefix="$TMP/art/" -paradiff_plant=roundtrip "$TMP/corpus"
    has "property broken: round trip equal"
    [ -n "$(ls "$TMP"/art/crash-* 2>/dev/null)" ] || fail "no crash artifact"
    expect 2 "$F" -runs=1 -paradiff_plant=nothing "$TMP/corpus"
    has "unknown flag -paradiff_plant=nothing"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
