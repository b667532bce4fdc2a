# Compiler and link flags shared by every paradiff target: warnings (errors under PARADIFF_WERROR,
# which scripts/test sets), the sanitizer of PARADIFF_SANITIZE, libFuzzer's coverage
# instrumentation and the allocator.
add_library(paradiff_flags INTERFACE)
target_compile_options(paradiff_flags INTERFACE -Wall -Wextra -Wno-unused-parameter)
if(PARADIFF_WERROR)
  target_compile_options(paradiff_flags INTERFACE -Werror)
endif()
target_include_directories(paradiff_flags INTERFACE ${PROJECT_SOURCE_DIR})
set(_sanitize_values OFF address thread)
if(NOT PARADIFF_SANITIZE IN_LIST _sanitize_values)
  message(FATAL_ERROR "PARADIFF_SANITIZE=${PARADIFF_SANITIZE}: must be one of ${_sanitize_values}")
endif()
if(PARADIFF_SANITIZE STREQUAL "address")
  set(_sanitizers address,undefined)
elseif(PARADIFF_SANITIZE STREQUAL "thread")
  set(_sanitizers thread)
endif()
if(_sanitizers)
  # UBSan's findings are errors, not log lines: a test that triggers one fails.
  target_compile_options(paradiff_flags INTERFACE -fsanitize=${_sanitizers} -fno-sanitize-recover=all
                                                  -fno-omit-frame-pointer)
  target_link_options(paradiff_flags INTERFACE -fsanitize=${_sanitizers})
endif()
if(PARADIFF_FUZZ)
  if(NOT PARADIFF_SANITIZE STREQUAL "address")
    message(FATAL_ERROR "PARADIFF_FUZZ=ON needs PARADIFF_SANITIZE=address (the asan preset)")
  endif()
  target_compile_options(paradiff_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()

# The allocator (docs/PERFORMANCE.md, "tcmalloc"): a check makes and frees tens of
# thousands of tensors of a few hundred elements on several threads at once, where glibc's malloc
# spent about a sixth of a campaign's CPU. Every executable links tcmalloc ahead of libc (kept even
# though no symbol of it is named); a sanitizer brings its own allocator, so none there.
if(PARADIFF_TCMALLOC AND NOT _sanitizers)
  find_library(PARADIFF_TCMALLOC_LIBRARY NAMES tcmalloc_minimal)
  if(PARADIFF_TCMALLOC_LIBRARY)
    target_link_options(paradiff_flags INTERFACE "LINKER:--push-state,--no-as-needed"
                        "${PARADIFF_TCMALLOC_LIBRARY}" "LINKER:--pop-state")
  else()
    message(STATUS "paradiff: tcmalloc not found (libgoogle-perftools-dev): glibc's malloc")
  endif()
endif()
