#!/bin/sh
# tests/run_suite.sh's verdicts on a stand-in for a gtest binary printing each kind of summary:
# passed 0, failed its status, all skipped 77, skipped and passed together 1.
runner=$(dirname "$0")/run_suite.sh
fake=$(mktemp) || exit 1
trap 'rm -f "$fake"' EXIT
cat >"$fake" <<'SH'
#!/bin/sh
case $FAKE in
  pass) echo "[  PASSED  ] 3 tests." ;;
  fail) echo "[  FAILED  ] 1 test"; exit 1 ;;
  skip) printf '%s\n' "[  PASSED  ] 0 tests." "[  SKIPPED ] 2 tests, listed below:" ;;
  mixed) printf '%s\n' "[  PASSED  ] 2 tests." "[  SKIPPED ] 1 test, listed below:" ;;
esac
SH
chmod +x "$fake"
status=0
for want in pass:0 fail:1 skip:77 mixed:1; do
  FAKE=${want%:*} sh "$runner" "$fake" Suite >/dev/null 2>&1
  got=$?
  [ "$got" = "${want#*:}" ] || { echo "FAIL: ${want%:*}: exit $got, expected ${want#*:}"; status=1; }
done
[ "$status" = 0 ] && echo "PASS: run_suite verdicts"
exit "$status"
