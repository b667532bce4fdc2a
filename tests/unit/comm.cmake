# Communicator tests: the fingerprint hashes, the shared argument checks, the local backend, the
# recording decorator and the views and fresh tensors made by hand, one binary.
paradiff_test(unit_comm
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/arg_checks_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/communicator_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/local_communicator_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/local_communicator_failure_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/recording_communicator_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/views_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/fresh_test.cpp
  LIBS paradiff_comm
  LABELS unit asan tsan)
