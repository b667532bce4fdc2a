#!/bin/sh
# run_suite.sh EXE SUITE: one gtest suite as one ctest test (tests/gtest_suites.cmake). Exits with
# the binary's status; 77 (ctest: skipped) when every case skipped; 1 when some cases skipped and
# others passed, since ctest would count the suite, skipped cases and all, as passed: such a suite
# belongs in PARADIFF_PER_CASE_SUITES (tests/CMakeLists.txt), which gives each case its own test.
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$1" --gtest_filter="$2.*" >"$log" 2>&1
rc=$?
cat "$log"
[ "$rc" -eq 0 ] || exit "$rc"
grep -q '^\[  SKIPPED \]' "$log" || exit 0
grep -q '^\[  PASSED  \] 0 tests' "$log" && exit 77
echo "FAIL: run_suite: suite $2 has skipped and passing cases; list it in PARADIFF_PER_CASE_SUITES" \
  "(tests/CMakeLists.txt) so that each case is its own test" >&2
exit 1
