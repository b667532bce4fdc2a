# Shared helpers of the end-to-end shell tests (sourced; needs CASE and TMP set, or e2e_init).
#   e2e_init BINARY SOURCE_DIR CASE   the usual arguments: sets P, SRC, CASE, EX (the example
#                        configs) and TMP (e2e_tmp)
#   e2e_tmp              TMP: a fresh directory removed on exit, also the TMPDIR of the test
#   fail MSG             print "FAIL: CASE: MSG" and exit 1
#   expect CODE CMD...   run CMD with its output in $TMP/out; fail unless it exits CODE
#                        (CODE "nonzero": any failure)
#   has REGEX / lacks REGEX   $TMP/out does / does not match
#   derive_json IN OUT 'python statements on c'   a JSON config IN with fields set, to OUT
#   derive_target IN OUT 'python statements on t'   the target file IN with absolute paths and
#                        fields set, to OUT
#   planted_target IN OUT PLANT   the same with "--plant PLANT" appended to its command
#   passes_on TARGET CONFIG...   `paradiff replay CONFIG... --target TARGET`: each CONFIG PASSes
#                        (none inconclusive)
#   caught_after_reload TARGET CONFIG   a finding at a step after the config's save_at (1 or 2)
#   need_env NAME        skip (exit 77) unless scripts/setup-targets made the environment NAME
#                        (work/venv/NAME) from the pinned file it has now
# On failure the last 40 lines of the output are shown.
fail() { echo "FAIL: $CASE: $*"; exit 1; }
expect() {
  local want=$1; shift
  local t0=$EPOCHREALTIME
  "$@" >"$TMP/out" 2>&1
  local got=$?
  # PARADIFF_TEST_TIMES=FILE: each command's seconds appended to FILE (where a test's time goes).
  [ -z "${PARADIFF_TEST_TIMES:-}" ] ||
    awk -v a="$t0" -v b="$EPOCHREALTIME" -v c="${*:1:4}" 'BEGIN { printf "%.1f s  %s\n", b - a, c }' >>"$PARADIFF_TEST_TIMES"
  if [ "$want" = nonzero ]; then
    [ "$got" -ne 0 ] || { tail -40 "$TMP/out"; fail "'$*' exited 0, expected a failure"; }
  else
    [ "$got" -eq "$want" ] || { tail -40 "$TMP/out"; fail "'$*' exited $got, expected $want"; }
  fi
}
has() { grep -qE -- "$1" "$TMP/out" || { tail -40 "$TMP/out"; fail "output lacks /$1/"; }; }
lacks() { ! grep -qE -- "$1" "$TMP/out" || { tail -40 "$TMP/out"; fail "output has /$1/"; }; }
derive_json() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"))
PY
}
passes_on() {  # one replay: the configs share one (warm) target worker
  local target=$1; shift
  expect 0 "$P" replay "$@" --target "$target"
  has "SUMMARY: paradiff: replay CLEAN configs=$# .* pass=$# invalid=0 unexpected=0 inconclusive=0\$"
  echo "on $(basename "$target"):"
  grep -E "^pass |SUMMARY" "$TMP/out"
}
caught_after_reload() {
  expect 3 "$P" run "$2" --target "$1"
  has "SUMMARY: paradiff: FINDING .* step=[12] "
}
# After a crash finding: the log of the first run dir it kept ("(run dir D kept)") holds TEXT
# (when given).
crash_log_has() {  # [TEXT]
  local dirs d
  dirs=$(sed -n 's/.*(run dir \(.*\) kept).*/\1/p' "$TMP/out")
  d=${dirs%%$'\n'*}
  [ -z "${1:-}" ] || grep -q -- "$1" "$d/target.log" || fail "the crash's log lacks /$1/ (see $d/target.log)"
}
need_env() {  # the stamp setup-targets writes once an install is complete (no 2 s import)
  cmp -s "$SRC/adapters/envs/$1.txt" "$SRC/work/venv/$1/.paradiff-stamp" ||
    { echo "SKIP: no $1 environment made from adapters/envs/$1.txt (scripts/setup-targets $1 makes it)"; exit 77; }
}
derive_target() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, os, sys
t = json.load(open(sys.argv[1]))
t["command"] = [a.replace("{target_dir}", os.path.dirname(os.path.abspath(sys.argv[1]))) for a in t["command"]]
exec(sys.argv[3])
json.dump(t, open(sys.argv[2], "w"))
PY
}
planted_target() { derive_target "$1" "$2" "t['command'] += ['--plant', '$3']"; }
# warm_leaks_nothing TARGET CONFIG N [VARY]: on one warm worker (protocol 2), CONFIG checked first
# and CONFIG checked again after N other configs (CONFIG with other data and learning rates, and
# VARY, Python run on the other config `c` and its index `i`) write byte-identical outputs (every
# file under out/ of their run dirs). The worker starts without a list of imports kept by an
# earlier one (adapters/torch/serve.py) and keeps one; a second worker, which imports that list
# before its first config, writes the same outputs for CONFIG again.
warm_leaks_nothing() {
  local target=$1 cfg=$2 n=$3 vary=${4:-pass} list=("$2") i
  # The others, $TMP/other1..n.json, written by one interpreter (derive_json's edit for each i).
  /usr/bin/python3 - "$cfg" "$TMP" "$n" "$vary" <<'PY'
import json, os, sys
src, tmp, n, vary = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for i in range(1, n + 1):
    c = json.load(open(src))
    c['seed'] = c.get('seed', 1) + i
    c['optimizer']['lr'] = c['optimizer'].get('lr', 0.01) * (1 + i / 8)
    exec(vary)
    json.dump(c, open(os.path.join(tmp, "other%d.json" % i), "w"))
PY
  for i in $(seq 1 "$n"); do list+=("$TMP/other$i.json"); done
  cp "$cfg" "$TMP/again.json"
  rm -rf "$TMP/keep" "$TMP/keep2" "$TMP/cache"
  expect 0 env XDG_CACHE_HOME="$TMP/cache" "$P" replay "${list[@]}" "$TMP/again.json" --target "$target" \
    --oracles numeric --keep-run-dirs "$TMP/keep"
  [ "$(ls "$TMP"/keep/paradiff-worker-*.log 2>/dev/null | wc -l)" = 1 ] || fail "expected one warm worker for all $((n + 2)) runs"
  [ -s "$(ls "$TMP"/cache/paradiff/serve-imports/*.txt 2>/dev/null | head -1)" ] || fail "the worker kept no list of imports"
  expect 0 env XDG_CACHE_HOME="$TMP/cache" "$P" replay "$cfg" --target "$target" --oracles numeric \
    --keep-run-dirs "$TMP/keep2"
  /usr/bin/python3 - "$TMP/keep" "$n" "$TMP/keep2" <<'PY' || fail "$(basename "$cfg") after $n others, or on a worker that imported the kept list, differs from its first run"
import filecmp, glob, os, sys
keep, n, keep2 = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# A checkpointed config's run dir holds its two phases, save/ and reload/.
def runs(d):
    return sorted(glob.glob(os.path.join(d, "paradiff-target-*")),
                  key=lambda r: os.stat(os.path.join(r, "config.json") if os.path.exists(os.path.join(r, "config.json"))
                                        else os.path.join(r, "save", "config.json")).st_mtime_ns)
first_worker, second_worker = runs(keep), runs(keep2)
assert len(first_worker) == n + 2, "expected %d run dirs, found %d" % (n + 2, len(first_worker))
assert len(second_worker) == 1, "expected 1 run dir, found %d" % len(second_worker)
first = first_worker[0]
outs = sorted(os.listdir(os.path.join(first, "out")))
assert outs, "no outputs in " + first
for other, what in ((first_worker[-1], "after %d others" % n), (second_worker[0], "on a second worker")):
    assert open(os.path.join(first, "config.json")).read() == open(os.path.join(other, "config.json")).read()
    assert outs == sorted(os.listdir(os.path.join(other, "out"))), (what, outs, os.listdir(os.path.join(other, "out")))
    _, diff, errors = filecmp.cmpfiles(os.path.join(first, "out"), os.path.join(other, "out"), outs, shallow=False)
    assert not diff and not errors, "%s: differ: %s %s" % (what, diff, errors)
    print("first and %s: %d output files identical" % (what, len(outs)))
PY
}
e2e_init() {
  P=$1
  SRC=$2
  CASE=$3
  EX=$SRC/configs/examples
  e2e_tmp
}
# TMP: a fresh directory removed on exit, and the temp dir of everything the test starts (what
# paradiff and the targets leave in the temp dir goes with it).
e2e_tmp() {
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  export TMPDIR=$TMP
}
