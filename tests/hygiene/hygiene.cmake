# What the code must look like, checked on every run of the tests (label hygiene): the tree is
# formatted as .clang-format says (format_test.sh), every note is defined once and referenced as
# `see Note [...]` (notes_test.py), and no include points up the layers (layering_test.py).
add_test(NAME hygiene.format COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hygiene/format_test.sh ${PROJECT_SOURCE_DIR})
add_test(NAME hygiene.notes COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/hygiene/notes_test.py ${PROJECT_SOURCE_DIR})
add_test(NAME hygiene.layering COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/hygiene/layering_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(hygiene.format hygiene.notes hygiene.layering PROPERTIES LABELS "hygiene" SKIP_RETURN_CODE 77 TIMEOUT 120)
