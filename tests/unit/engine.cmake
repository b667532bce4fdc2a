paradiff_test(unit_engine
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/engine_parity_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/faults_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/flat_layout_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/param_init_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/tp_parity_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/pp_parity_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/precision_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/bf16_gemm_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/conversions_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/aten_sum_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/batched_gemm_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/hand_backward_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/checkpoint_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/self_exe_test.cpp
  LIBS paradiff_oracles
  LABELS unit engine)
