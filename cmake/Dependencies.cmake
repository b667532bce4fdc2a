# All third-party dependencies, found once. CUDA / NCCL / MPI are optional.
find_package(Torch REQUIRED)
find_package(Boost REQUIRED COMPONENTS program_options)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
if(PARADIFF_TESTS)
  find_package(GTest REQUIRED)
endif()

find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND)
  message(STATUS "paradiff: MPI found (${MPI_CXX_VERSION})")
else()
  message(STATUS "paradiff: MPI not found; the mpi backend is not built")
endif()

# Torch's own flags (the C++11 ABI define) go on an interface target that every torch user links.
add_library(paradiff_torch INTERFACE)
target_link_libraries(paradiff_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(paradiff_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(paradiff_torch INTERFACE ${_torch_flags})

# CUDA kernels and the nccl backend, each only where its toolchain is found (after MPI: the nccl
# backend is bootstrapped through it).
include(${CMAKE_CURRENT_LIST_DIR}/Cuda.cmake)
