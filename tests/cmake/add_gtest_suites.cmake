# Run by ctest before the tests (a TEST_INCLUDE_FILES script): one ctest test per GoogleTest
# suite. Every process of the test binary spends about 0.8 s loading LibTorch and its 280
# libraries before the first test; paid per suite (about 100) instead of per test (about 450),
# that is some five minutes of CPU less on a 2-core machine. `ctest -R Suite` selects a suite;
# `attnscope_tests --gtest_filter=Suite.Name` runs one test. Each suite runs through the suite
# client, as a child of the suite server (tests/suite_server.cpp), which loads LibTorch once for
# all of them, or as a process of its own when no server answers.
# Set by the including file: ATTNSCOPE_TEST_BINARY, ATTNSCOPE_SUITE_CLIENT, ATTNSCOPE_SUITE_SOCKET,
# ATTNSCOPE_TEST_WORKING_DIR, ATTNSCOPE_TEST_FIXTURES (a list), ATTNSCOPE_TEST_PROPERTIES.
if(NOT EXISTS "${ATTNSCOPE_TEST_BINARY}")
  add_test(attnscope_tests_NOT_BUILT attnscope_tests_NOT_BUILT)
  return()
endif()
execute_process(COMMAND "${ATTNSCOPE_TEST_BINARY}" --gtest_list_tests
                WORKING_DIRECTORY "${ATTNSCOPE_TEST_WORKING_DIR}"
                OUTPUT_VARIABLE listing ERROR_VARIABLE listing_errors
                RESULT_VARIABLE listing_status TIMEOUT 120)
if(NOT listing_status EQUAL 0)
  # A binary that cannot list its tests is one failing test that shows why, never an empty suite.
  add_test(attnscope_tests_LIST_FAILED "${ATTNSCOPE_TEST_BINARY}" --gtest_list_tests)
  return()
endif()
# Suite lines start in the first column ("Suite." or "Prefix/Suite.", perhaps followed by
# "  # TypeParam = ..."); its tests are indented under it (semicolons and brackets of
# parameter comments are made harmless before the text becomes a CMake list).
# COST, the suite's number of tests, makes a first `ctest --parallel` (no timings recorded yet)
# start the large suites first instead of finishing on one of them with a core idle.
string(REGEX REPLACE "[][;]" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suite "")
set(suite_count 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.")
    set(suite "${CMAKE_MATCH_1}")
    add_test("${suite}" "${ATTNSCOPE_SUITE_CLIENT}" "${ATTNSCOPE_SUITE_SOCKET}" "${ATTNSCOPE_TEST_BINARY}"
             "--gtest_filter=${suite}.*")
    set_tests_properties("${suite}" PROPERTIES WORKING_DIRECTORY "${ATTNSCOPE_TEST_WORKING_DIR}"
                                               FIXTURES_REQUIRED "${ATTNSCOPE_TEST_FIXTURES}"
                                               ${ATTNSCOPE_TEST_PROPERTIES})
    set(tests_in_${suite} 0)
    math(EXPR suite_count "${suite_count} + 1")
  elseif(line MATCHES "^  [A-Za-z_]" AND NOT suite STREQUAL "")
    math(EXPR tests_in_${suite} "${tests_in_${suite}} + 1")
    set_tests_properties("${suite}" PROPERTIES COST "${tests_in_${suite}}")
  endif()
endforeach()
if(suite_count EQUAL 0)
  add_test(attnscope_tests_NO_SUITES "${ATTNSCOPE_TEST_BINARY}" --gtest_list_tests)
  set_tests_properties(attnscope_tests_NO_SUITES PROPERTIES WILL_FAIL TRUE)
endif()
