# Unit tests of minimization, replay, the gate and the HTML / JUnit reports.
paradiff_test(unit_minimize
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/gate_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/html_report_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/minimizer_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/replay_test.cpp
  LIBS paradiff_reports paradiff_fuzz
  LABELS unit minimize)
