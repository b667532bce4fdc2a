# Unit tests of paradiff_fuzz: the config domain (generate / mutate / shrink / features).
paradiff_test(unit_fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/config_domain_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/campaign_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/feedback_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/workdir_lock_test.cpp
  LIBS paradiff_fuzz
  LABELS unit fuzz asan)
