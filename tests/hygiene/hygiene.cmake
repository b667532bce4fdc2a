# What the code must look like, checked on every run of the tests (label hygiene): the tree is
# formatted as .clang-format says (format_test.sh).
add_test(NAME hygiene.format COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hygiene/format_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(hygiene.format PROPERTIES LABELS "hygiene" SKIP_RETURN_CODE 77 TIMEOUT 120)
