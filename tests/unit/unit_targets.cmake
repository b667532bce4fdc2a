# Unit tests of paradiff_targets: safetensors, target files, run dirs, config translation, crash
# states.
paradiff_test(unit_targets
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/targets_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/crash_state_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/run_dir_test.cpp
  LIBS paradiff_targets
  LABELS unit targets)
