# Unit tests of paradiff_targets: safetensors, target files, config translation.
paradiff_test(unit_targets
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/targets_test.cpp
  LIBS paradiff_targets
  LABELS unit targets)
