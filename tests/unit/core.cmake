# Unit tests of paradiff_core (config model, JSON I/O, validation, budget). Included by
# tests/CMakeLists.txt; ctest -L unit -R 'Config|Validate|Budget'.
paradiff_test(unit_core NO_TORCH
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/config_json_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/config_examples_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/validate_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/validate_training_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/budget_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/lr_schedule_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/spelling_test.cpp
  LIBS paradiff_core
  LABELS unit asan tsan
)
# The example / invalid config tests read configs/ from the source tree.
target_compile_definitions(unit_core PRIVATE PARADIFF_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
