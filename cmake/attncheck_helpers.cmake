# attncheck_test(NAME SOURCES... [LIBS libs...] [LABELS labels...] [ENV VAR=value...])
# Adds a GoogleTest executable under tests/ and registers it with ctest.
function(attncheck_test name)
  cmake_parse_arguments(arg "" "" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  add_executable(${name} ${arg_SOURCES} ${arg_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gtest_main)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${arg_LABELS}" ENVIRONMENT "${arg_ENV}")
endfunction()
