# End-to-end tests of the libFuzzer target (libfuzzer_test.sh), one ctest test per case. Only in a
# build with PARADIFF_FUZZ=ON (the `asan` preset: clang), where the target exists.
if(PARADIFF_FUZZ AND TARGET paradiff_fuzz_target)
  foreach(case clean injected_found merge bad_flag)
    add_test(NAME e2e.libfuzzer.${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/libfuzzer_test.sh
                     $<TARGET_FILE:paradiff_fuzz_target> ${PROJECT_SOURCE_DIR} ${case})
    set_tests_properties(e2e.libfuzzer.${case} PROPERTIES LABELS "e2e;fuzz;asan" TIMEOUT 600)
  endforeach()
  foreach(case parse parse_planted)
    add_test(NAME e2e.libfuzzer.${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/libfuzzer_test.sh
                     $<TARGET_FILE:paradiff_parse_fuzz> ${PROJECT_SOURCE_DIR} ${case})
    set_tests_properties(e2e.libfuzzer.${case} PROPERTIES LABELS "e2e;fuzz;asan" TIMEOUT 300)
  endforeach()
endif()
