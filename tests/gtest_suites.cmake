# Registers one gtest binary's tests with ctest, one test per suite (cmake -P, run after each link
# of the binary by paradiff_test in tests/CMakeLists.txt). A LibTorch process takes about 0.7 s to
# start (1.8 s under ASan), more than most cases take to run, so a process per suite rather than
# per case. tests/run_suite.sh runs a suite: skipped when every case skips, failed when some skip
# and some pass (no skipped case counts as passed); the suites in PER_CASE, whose cases may skip
# one by one, get a test per case instead.
#   -D EXE=binary -D OUT=file to write -D RUNNER=tests/run_suite.sh -D WORKDIR=dir
#   -D LABELS=a,b -D PER_CASE=Suite1,Suite2
cmake_minimum_required(VERSION 3.20)
string(REPLACE "," ";" labels "${LABELS}")
string(REPLACE "," ";" per_case "${PER_CASE}")
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE rc
                TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gtest_suites: ${EXE} --gtest_list_tests failed (${rc}):\n${listing}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(script "# Written by tests/gtest_suites.cmake from ${EXE} --gtest_list_tests.\n")
set(suite "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE " *#.*$" "" line "${line}")  # "  # GetParam() = ..." of parameterized cases
  if(line MATCHES "^([^ ]+)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    if(NOT suite IN_LIST per_case)
      set(name "${suite}")
      string(APPEND script "add_test([==[${name}]==] sh [==[${RUNNER}]==] [==[${EXE}]==] [==[${suite}]==])\n")
      string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES SKIP_RETURN_CODE 77")
      string(APPEND script " WORKING_DIRECTORY [==[${WORKDIR}]==] LABELS [==[${labels}]==])\n")
    endif()
  elseif(line MATCHES "^  ([^ ]+)$" AND suite IN_LIST per_case)
    set(name "${suite}.${CMAKE_MATCH_1}")
    string(APPEND script "add_test([==[${name}]==] [==[${EXE}]==] [==[--gtest_filter=${name}]==])\n")
    string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES SKIP_REGULAR_EXPRESSION")
    string(APPEND script " [==[\\[  SKIPPED \\]]==] WORKING_DIRECTORY [==[${WORKDIR}]==] LABELS [==[${labels}]==])\n")
  endif()
endforeach()
file(WRITE "${OUT}.tmp" "${script}")
file(RENAME "${OUT}.tmp" "${OUT}")
