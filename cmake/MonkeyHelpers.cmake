# SPDX-License-Identifier: Apache-2.0
#
# monkey_add_component(NAME <name> SOURCES <files...> [PUBLIC_DEPS <targets...>]
#                      [PRIVATE_DEPS <targets...>] [TESTS <test sources...>] [TEST_DEPS <targets...>]
#                      [PCH <headers...>])
#
# Builds library `monkey_<name>` with alias `monkey::<name>`, includes rooted at the
# repository (`#include "runtime/journal.hpp"`), and, when tests are enabled, the test
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
    catch_discover_tests(${t} PROPERTIES TIMEOUT 120
      ENVIRONMENT "MONKEY_BIN_DIR=${PROJECT_BINARY_DIR}/bin")
  endif()
endfunction()

# monkey_add_app(NAME <name> SOURCES <files...> [DEPS <targets...>])
#
# Builds an experiment app executable `monkey-app-<name>` into bin/ and links it with the
# runtime and actor libraries. Apps are registered with the runtime by name.
function(monkey_add_app)
  cmake_parse_arguments(MA "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(monkey-app-${MA_NAME} ${MA_SOURCES})
  target_link_libraries(monkey-app-${MA_NAME} PRIVATE monkey::actors monkey::runtime ${MA_DEPS} monkey_internal)
  set_target_properties(monkey-app-${MA_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()
