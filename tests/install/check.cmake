# SPDX-License-Identifier: Apache-2.0
# ctest install.sdk: `cmake --install` the build into a fresh prefix, build tests/install/app
# (an app) against it with find_package(Monkey), and run it as a job of the installed node.
#   cmake -DBUILD=<build dir> -DSRC=<tests/install/app> -DWORK=<scratch dir> -P check.cmake
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(f bin/monkey bin/monkey-runtime include/monkey/sdk/attempt.hpp include/monkey/app.hpp
          include/monkey/sdk/message.hpp
          include/monkey/sdk/version.hpp share/doc/monkey/README.md
          share/doc/monkey/architecture.md)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()
file(GLOB targets ${prefix}/lib*/cmake/Monkey/MonkeyTargets.cmake)
if(NOT targets)
  message(FATAL_ERROR "the install lacks lib/cmake/Monkey/MonkeyTargets.cmake")
endif()
file(READ ${targets} exported)
get_filename_component(src_root ${SRC}/../../.. ABSOLUTE)
string(FIND "${exported}" "${src_root}" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "the exported targets name the source tree (${src_root}):\n${exported}")
endif()

run("configure the app" ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/app -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release)
run("build the app" ${CMAKE_COMMAND} --build ${WORK}/app)
run("installed monkey --version" ${prefix}/bin/monkey --version)
string(STRIP "${out}" cli_version)
string(REPLACE "monkey " "" version "${cli_version}")

run("the app's description" ${WORK}/app/monkey-app-greet --describe)
string(FIND "${out}" "\"lr\"" has_lr)
if(has_lr EQUAL -1)
  message(FATAL_ERROR "--describe does not name the parameter lr: ${out}")
endif()
# docs/writing-apps.md's out-of-tree example, taken from the page and built the same way.
find_program(PYTHON3 python3 REQUIRED)
run("the doc's app extracted" ${PYTHON3} ${SRC}/../doc_app.py ${SRC}/../../../docs/writing-apps.md
    ${WORK}/doc-src)
run("configure the doc's app" ${CMAKE_COMMAND} -S ${WORK}/doc-src -B ${WORK}/doc-app
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build the doc's app" ${CMAKE_COMMAND} --build ${WORK}/doc-app)
foreach(app hello allreduce fmnist)
  if(NOT EXISTS ${prefix}/lib/monkey/apps/monkey-app-${app})
    message(FATAL_ERROR "the install lacks the built-in app lib/monkey/apps/monkey-app-${app}")
  endif()
endforeach()
# As jobs of the installed node, which offers both apps and the built-in ones (--app-dir
# three times): 3 ranks, metrics per rank, a rank's log; the doc's sum checked on every rank.
run("the apps as jobs" ${PYTHON3} ${SRC}/../run_app.py ${prefix} ${WORK}/app ${WORK}/doc-app)
message(STATUS "installed and built against: ${out}")
