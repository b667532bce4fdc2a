# Shared helpers of the end-to-end shell tests (sourced; needs CASE and TMP set, or e2e_init).
#   e2e_init BINARY SOURCE_DIR CASE   the usual arguments: sets P, SRC, CASE, EX (the example
#                        configs) and TMP (a fresh directory removed on exit)
#   fail MSG             print "FAIL: CASE: MSG" and exit 1
#   expect CODE CMD...   run CMD with its output in $TMP/out; fail unless it exits CODE
#                        (CODE "nonzero": any failure)
#   has REGEX / lacks REGEX   $TMP/out does / does not match
# On failure the last 40 lines of the output are shown.
fail() { echo "FAIL: $CASE: $*"; exit 1; }
expect() {
  local want=$1; shift
  "$@" >"$TMP/out" 2>&1
  local got=$?
  if [ "$want" = nonzero ]; then
    [ "$got" -ne 0 ] || { tail -40 "$TMP/out"; fail "'$*' exited 0, expected a failure"; }
  else
    [ "$got" -eq "$want" ] || { tail -40 "$TMP/out"; fail "'$*' exited $got, expected $want"; }
  fi
}
has() { grep -qE -- "$1" "$TMP/out" || { tail -40 "$TMP/out"; fail "output lacks /$1/"; }; }
lacks() { ! grep -qE -- "$1" "$TMP/out" || { tail -40 "$TMP/out"; fail "output has /$1/"; }; }
e2e_init() {
  P=$1
  SRC=$2
  CASE=$3
  EX=$SRC/configs/examples
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
}
