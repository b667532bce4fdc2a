# Optional CUDA parts (included from Dependencies.cmake, after MPI was looked for):
# - paradiff_cuda_twins: the CPU twins of the CUDA kernels (kernels/cuda/cpu_twins.*), always built.
# - paradiff_cuda: the kernels (kernels/cuda/*.cu, sm_${CMAKE_CUDA_ARCHITECTURES}) and their host
#   API (cuda_kernels.h); only where a CUDA compiler is found. Users get PARADIFF_HAVE_CUDA=1.
# - paradiff_nccl: the nccl Communicator backend (comm/nccl_communicator.*, comm/nccl_args.*); only where CUDA, NCCL
#   and MPI (the bootstrap) are found. Users get PARADIFF_HAVE_NCCL=1.
# Without nvcc nothing here fails: the targets are simply not defined, and the gpu tests register
# placeholders that skip (tests/gpu/gpu.cmake). No GPU is needed to build; none is probed.
set(PARADIFF_HAVE_CUDA OFF)
set(PARADIFF_HAVE_NCCL OFF)

add_library(paradiff_cuda_twins STATIC ${PROJECT_SOURCE_DIR}/kernels/cuda/cpu_twins.cpp)
# paradiff_flags stays private: its options are host-compiler flags that nvcc would reject.
target_include_directories(paradiff_cuda_twins PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(paradiff_cuda_twins PRIVATE paradiff_flags)
# See Note [Fused Adam arithmetic] (cpu_twins.h): one rounding per operation, never a fused multiply-add.
target_compile_options(paradiff_cuda_twins PRIVATE -ffp-contract=off)

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "paradiff: no CUDA compiler; CUDA kernels and the nccl backend are not built")
  return()
endif()

# Hopper (H100 / H200) unless the user chose; `native` would fail on machines without a GPU.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit)
if(NOT CUDAToolkit_FOUND)
  message(STATUS "paradiff: nvcc found but not the CUDA toolkit libraries; CUDA parts are not built")
  return()
endif()
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(PARADIFF_HAVE_CUDA ON)
message(STATUS "paradiff: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}), architectures ${CMAKE_CUDA_ARCHITECTURES}")

set(_cuda_dir ${PROJECT_SOURCE_DIR}/kernels/cuda)
add_library(paradiff_cuda STATIC
  ${PROJECT_SOURCE_DIR}/core/cuda/cuda_support.cpp
  ${_cuda_dir}/device.cpp
  ${_cuda_dir}/overflow_check.cu
  ${_cuda_dir}/cast.cu
  ${_cuda_dir}/fused_adam.cu
)
set_target_properties(paradiff_cuda PROPERTIES
  CUDA_SEPARABLE_COMPILATION OFF
  CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
  POSITION_INDEPENDENT_CODE ON)
target_link_libraries(paradiff_cuda PUBLIC paradiff_cuda_twins PRIVATE CUDA::cudart_static)
target_compile_definitions(paradiff_cuda PUBLIC PARADIFF_HAVE_CUDA=1)
# paradiff_flags' warnings are g++ flags: hand them to the host compiler only.
target_compile_options(paradiff_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
if(PARADIFF_WERROR)
  target_compile_options(paradiff_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                               $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
endif()
# cuda_support.cpp and device.cpp are host C++ that include <cuda_runtime.h>.
target_include_directories(paradiff_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})

# NCCL has no CMake package: header + library next to the toolkit (or under NCCL_ROOT).
find_path(PARADIFF_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include NO_CMAKE_PATH)
find_library(PARADIFF_NCCL_LIBRARY nccl
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib lib64)
if(NOT PARADIFF_NCCL_INCLUDE_DIR OR NOT PARADIFF_NCCL_LIBRARY)
  message(STATUS "paradiff: NCCL not found (nccl.h / libnccl); the nccl backend is not built")
  return()
endif()
if(NOT MPI_CXX_FOUND)
  message(STATUS "paradiff: NCCL found but not MPI (its bootstrap); the nccl backend is not built")
  return()
endif()
file(STRINGS ${PARADIFF_NCCL_INCLUDE_DIR}/nccl.h _nccl_code REGEX "^#define NCCL_VERSION_CODE")
string(REGEX REPLACE "[^0-9]" "" _nccl_code "${_nccl_code}")
if(_nccl_code LESS 21800)
  message(STATUS "paradiff: NCCL ${_nccl_code} lacks ncclCommSplit (needs >= 2.18); nccl backend not built")
  return()
endif()
add_library(paradiff_nccl_lib UNKNOWN IMPORTED)
set_target_properties(paradiff_nccl_lib PROPERTIES
  IMPORTED_LOCATION ${PARADIFF_NCCL_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${PARADIFF_NCCL_INCLUDE_DIR})
set(PARADIFF_HAVE_NCCL ON)
math(EXPR _nccl_major "${_nccl_code} / 10000")
math(EXPR _nccl_minor "(${_nccl_code} % 10000) / 100")
math(EXPR _nccl_patch "${_nccl_code} % 100")
message(STATUS "paradiff: NCCL ${_nccl_major}.${_nccl_minor}.${_nccl_patch} at ${PARADIFF_NCCL_LIBRARY}; the nccl backend is built")

add_library(paradiff_nccl STATIC
  ${PROJECT_SOURCE_DIR}/comm/nccl_communicator.cpp
  ${PROJECT_SOURCE_DIR}/comm/nccl_args.cpp)
target_link_libraries(paradiff_nccl
  PUBLIC paradiff_comm paradiff_cuda
  PRIVATE paradiff_nccl_lib CUDA::cudart_static)
target_compile_definitions(paradiff_nccl PUBLIC PARADIFF_HAVE_NCCL=1)
