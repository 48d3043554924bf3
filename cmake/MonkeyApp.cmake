# SPDX-License-Identifier: Apache-2.0
# monkey_add_app(NAME <name> SOURCES <files...> [DEPS <targets...>])
#
# Builds an experiment app: the executable `monkey-app-<name>`, linked with the app host
# (monkey::app: `#include <monkey/app.hpp>`) and DEPS, nothing of the runtime's internals. The same helper serves this
# tree (apps/) and programs built against an installed Monkey (find_package(Monkey)).
function(monkey_add_app)
  cmake_parse_arguments(MA "" "NAME" "SOURCES;DEPS" ${ARGN})
  if(NOT MA_NAME OR NOT MA_SOURCES)
    message(FATAL_ERROR "monkey_add_app: NAME and SOURCES are required")
  endif()
  add_executable(monkey-app-${MA_NAME} ${MA_SOURCES})
  target_link_libraries(monkey-app-${MA_NAME} PRIVATE monkey::app ${MA_DEPS})
  target_compile_features(monkey-app-${MA_NAME} PRIVATE cxx_std_17)
  if(DEFINED MONKEY_APP_OUTPUT_DIRECTORY)
    set_target_properties(monkey-app-${MA_NAME} PROPERTIES
      RUNTIME_OUTPUT_DIRECTORY ${MONKEY_APP_OUTPUT_DIRECTORY})
  endif()
endfunction()
