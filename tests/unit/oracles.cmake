# Oracle self-tests: each oracle catches a bug planted into a clean run and stays silent on clean
# runs; the registry and CheckRun's orchestration; localization and signature stability.
paradiff_test(unit_oracles
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/oracle_registry_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/tiling_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/replica_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/memory_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/collective_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/validation_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/numeric_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/exact_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/bitwise_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/update_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/cross_backend_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/determinism_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/metamorphic_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/piece_values_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/restart_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/overflow_decision_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/mirror_oracle_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/twin_samples_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/edge_regime_test.cpp
  LIBS paradiff_oracles
  LABELS unit oracles)
target_compile_definitions(unit_oracles PRIVATE PARADIFF_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
