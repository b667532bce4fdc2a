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
set(suites "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE " *#.*$" "" line "${line}")  # "  # GetParam() = ..." of parameterized cases
  if(line MATCHES "^([^ ]+)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    set(cases_${suite} "")
  elseif(line MATCHES "^  ([^ ]+)$")
    list(APPEND cases_${suite} "${CMAKE_MATCH_1}")
  endif()
endforeach()
# COST: a suite's number of cases, so that ctest starts the larger suites first where it has no
# timings of its own yet (a fresh build tree), and a long suite does not run last alone.
set(script "# Written by tests/gtest_suites.cmake from ${EXE} --gtest_list_tests.\n")
set(common "WORKING_DIRECTORY [==[${WORKDIR}]==] LABELS [==[${labels}]==]")
foreach(suite IN LISTS suites)
  list(LENGTH cases_${suite} n)
  if(suite IN_LIST per_case)
    foreach(case IN LISTS cases_${suite})
      set(name "${suite}.${case}")
      string(APPEND script "add_test([==[${name}]==] [==[${EXE}]==] [==[--gtest_filter=${name}]==])\n"
             "set_tests_properties([==[${name}]==] PROPERTIES SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==] ${common})\n")
    endforeach()
  else()
    string(APPEND script "add_test([==[${suite}]==] sh [==[${RUNNER}]==] [==[${EXE}]==] [==[${suite}]==])\n"
           "set_tests_properties([==[${suite}]==] PROPERTIES SKIP_RETURN_CODE 77 COST ${n} ${common})\n")
  endif()
endforeach()
file(WRITE "${OUT}.tmp" "${script}")
file(RENAME "${OUT}.tmp" "${OUT}")
