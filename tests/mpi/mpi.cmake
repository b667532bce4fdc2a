# mpi-labelled tests: the mpi communicator against the local backend (np 2 and 4), `paradiff run
# --backend mpi`, the cross-backend oracle (bitwise; data, tensor and pipeline parallel; a checkpoint
# reloaded into another layout), and a
# planted hang, crash and collective mismatch under the mpirun executor, a slow mpirun
# start-up that is not a hang, and persistent jobs (kernels/mpi_job.h) that give a fresh job's
# observations and recover from a crash and a hang. Each test is skipped
# (exit 77, with its reason) when MPI was not found at configure time or mpirun is not on PATH when
# the test runs. The environment lets mpirun run as root, oversubscribe 2 cores and stay on
# loopback / shared memory (TOOLCHAIN.md).
set(_mpi_tests mpi.comm.np2 mpi.comm.np4 mpi.cli.run_np2 mpi.cli.run_np4 mpi.cli.run_finding
    mpi.cli.cli_options mpi.cli.cross_backend mpi.cli.checkpoint mpi.cli.regression_corpus
    mpi.cli.campaign_distributed mpi.cli.campaign_backend_mpi
    mpi.cross_backend.np2 mpi.cross_backend.np3 mpi.cross_backend.np4
    mpi.cross_backend.tp2_pp2
    mpi.executor.hang mpi.executor.crash mpi.executor.mismatch mpi.executor.slow_start
    mpi.executor.no_start mpi.executor.job mpi.executor.job_crash mpi.executor.job_hang)
if(MPI_CXX_FOUND)
  add_executable(mpi_comm_test ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_comm_test.cpp)
  target_link_libraries(mpi_comm_test PRIVATE paradiff_comm_mpi paradiff_flags)
  add_executable(mpi_engine_test ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_engine_test.cpp)
  target_link_libraries(mpi_engine_test PRIVATE paradiff_oracles paradiff_kernels paradiff_core paradiff_flags)
  set(_run bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/with_mpirun.sh)
  set(_engine ${_run} $<TARGET_FILE:mpi_engine_test> $<TARGET_FILE:paradiff> ${PROJECT_SOURCE_DIR})
  foreach(np 2 4)
    add_test(NAME mpi.comm.np${np}
             COMMAND ${_run} mpirun --bind-to none -np ${np} $<TARGET_FILE:mpi_comm_test>)
  endforeach()
  foreach(case run_np2 run_np4 run_finding cli_options cross_backend checkpoint regression_corpus
               campaign_distributed
               campaign_backend_mpi)
    add_test(NAME mpi.cli.${case}
             COMMAND ${_run} bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_cli_test.sh
                     $<TARGET_FILE:paradiff> ${PROJECT_SOURCE_DIR} ${case})
  endforeach()
  add_test(NAME mpi.cross_backend.np2 COMMAND ${_engine} cross dp2_bf16_accum.json)
  add_test(NAME mpi.cross_backend.np3 COMMAND ${_engine} cross dp3_zero3_adamw.json)
  add_test(NAME mpi.cross_backend.np4 COMMAND ${_engine} cross dp4_zero2.json)
  # Tensor and pipeline parallel groups, point-to-point activations (Send / Recv) between stages.
  add_test(NAME mpi.cross_backend.tp2_pp2
           COMMAND ${_engine} cross ${CMAKE_CURRENT_SOURCE_DIR}/mpi/configs/tp2_pp2.json)
  foreach(case hang crash mismatch slow_start no_start job job_crash job_hang)
    add_test(NAME mpi.executor.${case} COMMAND ${_engine} ${case})
  endforeach()
else()
  paradiff_skipped_tests("MPI (C++) was not found when configuring: the mpi backend is not built"
                         ${_mpi_tests})
endif()
set_tests_properties(${_mpi_tests} PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77 TIMEOUT 120
  ENVIRONMENT "${PARADIFF_MPIRUN_ENV}")
if(MPI_CXX_FOUND)  # every regression config once more under mpirun (about 2 minutes on 2 cores)
  set_tests_properties(mpi.cli.regression_corpus PROPERTIES TIMEOUT 600)
endif()

# The observations file format the executor reads (no MPI needed): one ctest test.
add_executable(observations_io_test ${CMAKE_CURRENT_SOURCE_DIR}/mpi/observations_io_test.cpp)
target_link_libraries(observations_io_test PRIVATE paradiff_kernels GTest::gtest GTest::gtest_main paradiff_flags)
add_test(NAME mpi.observations_io COMMAND observations_io_test)
set_tests_properties(mpi.observations_io PROPERTIES LABELS "mpi;unit" TIMEOUT 60)
