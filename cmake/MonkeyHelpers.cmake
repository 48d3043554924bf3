# SPDX-License-Identifier: Apache-2.0
#
# monkey_add_component(NAME <name> SOURCES <files...> [PUBLIC_DEPS <targets...>]
#                      [PRIVATE_DEPS <targets...>] [TESTS <test sources...>] [TEST_DEPS <targets...>]
#                      [PCH <headers...>])
#
# Builds library `monkey_<name>` with alias `monkey::<name>`, includes rooted at the
# repository (`#include "runtime/journal/journal.hpp"`), and, when tests are enabled, the test
# executable `monkey_<name>_tests` from TESTS linked with the shared Catch2 main; every
# TEST_CASE is registered with ctest through catch_discover_tests. PCH: headers to
# precompile for the library (CAF's, which cost most of each translation unit's time).
function(monkey_add_component)
  cmake_parse_arguments(MC "" "NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS;TESTS;TEST_DEPS;PCH" ${ARGN})
  set(lib monkey_${MC_NAME})
  add_library(${lib} STATIC ${MC_SOURCES})
  add_library(monkey::${MC_NAME} ALIAS ${lib})
  target_include_directories(${lib} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${lib} PUBLIC ${MC_PUBLIC_DEPS} PRIVATE monkey_internal ${MC_PRIVATE_DEPS})
  set_target_properties(${lib} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(MC_PCH)
    target_precompile_headers(${lib} PRIVATE ${MC_PCH})
  endif()
  if(MONKEY_BUILD_TESTS AND MC_TESTS)
    set(t monkey_${MC_NAME}_tests)
    add_executable(${t} ${MC_TESTS})
    target_link_libraries(${t} PRIVATE monkey_catch_main ${lib} ${MC_TEST_DEPS} monkey_internal)
    # A case that cannot run here (e.g. [cuda] without a GPU) prints MONKEY-SKIPPED: and
    # shows as skipped, not passed (Catch2 v2 has no SKIP).
    catch_discover_tests(${t} PROPERTIES TIMEOUT 120
      ENVIRONMENT "MONKEY_BIN_DIR=${PROJECT_BINARY_DIR}/bin"
      SKIP_REGULAR_EXPRESSION "MONKEY-SKIPPED:")
    monkey_check_test_names(${t})
  endif()
endfunction()

# monkey_check_test_names(<test executable>): a ctest test that fails, naming them, when a
# TEST_CASE name holds a semicolon. catch_discover_tests cuts such a name in two (a CMake
# list), and neither half matches the case: it would pass under ctest without running.
function(monkey_check_test_names t)
  add_test(NAME ${t}.names_whole
    COMMAND sh -c "! '$<TARGET_FILE:${t}>' --list-test-names-only | grep -nP '\\x3b'")
endfunction()

# monkey_add_app: cmake/MonkeyApp.cmake (shared with the installed package).
include(MonkeyApp)
set(MONKEY_APP_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
