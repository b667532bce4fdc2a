# CUDA kernels and the nccl backend (cmake/Cuda.cmake).
# - unit_cuda_twins (label unit, every build): the CPU twins against c10's casts and
#   kernels/optim.cpp's OptimizerUpdate, bit for bit.
# - CudaKernelsGpu (label gpu): kernels against twins; built where nvcc is found.
# - NcclCommGpu.np1 / np2 / np4 (labels gpu;mpi): the nccl backend against the local backend under
#   mpirun; built where CUDA, NCCL and MPI are found.
# A gpu test exits 77 (ctest: Skipped) with a "SKIP: ..." line when the machine has no CUDA device
# (or fewer than its ranks); where its parts were not built, a placeholder says so and skips.
paradiff_test(unit_cuda_twins
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cpu_twins_test.cpp
  LIBS paradiff_cuda_twins paradiff_kernels
  LABELS unit)

set(_nccl_tests NcclCommGpu.np1 NcclCommGpu.np2 NcclCommGpu.np4)
if(PARADIFF_HAVE_CUDA)
  add_executable(cuda_kernels_gpu_test ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_kernels_gpu_test.cpp)
  target_link_libraries(cuda_kernels_gpu_test PRIVATE paradiff_cuda CUDA::cudart_static GTest::gtest paradiff_flags)
  add_test(NAME CudaKernelsGpu COMMAND cuda_kernels_gpu_test)
else()
  paradiff_skipped_tests(
    "no CUDA compiler (nvcc) was found when configuring: the CUDA kernels are not built" CudaKernelsGpu)
endif()
set_tests_properties(CudaKernelsGpu PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 TIMEOUT 300)

if(PARADIFF_HAVE_NCCL)
  add_executable(nccl_comm_test ${CMAKE_CURRENT_SOURCE_DIR}/gpu/nccl_comm_test.cpp)
  target_link_libraries(nccl_comm_test PRIVATE paradiff_nccl paradiff_comm_mpi paradiff_cuda paradiff_flags)
  foreach(np 1 2 4)
    add_test(NAME NcclCommGpu.np${np}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/with_mpirun.sh
                     mpirun --bind-to none -np ${np} $<TARGET_FILE:nccl_comm_test>)
  endforeach()
else()
  paradiff_skipped_tests(
    "CUDA, NCCL >= 2.18 and MPI were not all found when configuring: the nccl backend is not built"
    ${_nccl_tests})
endif()
set_tests_properties(${_nccl_tests} PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "NCCL_SOCKET_IFNAME=lo;NCCL_DEBUG=WARN;${PARADIFF_MPIRUN_ENV}")
