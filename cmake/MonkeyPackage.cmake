# SPDX-License-Identifier: Apache-2.0
# `cpack -G DEB` in a build folder (or `bash scripts/package`): two Debian packages.
#   monkey      the binaries (stripped), the built-in apps (lib/monkey/apps), libmonkey_app,
#               the Python helper and the docs; Depends from dpkg-shlibdeps, Recommends
#               dataset-fashion-mnist. Relocatable: everything is found from the folder of
#               the binaries, so `dpkg-deb -x monkey_*.deb DIR` runs as installed.
#   monkey-dev  the SDK: headers, libmonkey_sdk.a, the CMake package (find_package(Monkey)).
# The install() calls name their component: runtime (monkey) or dev (monkey-dev).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME monkey)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Monkey")
set(CPACK_PACKAGE_CONTACT "Monkey developers <monkey-dev@lists.example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "actor-model runtime that runs ML jobs and sweeps on a pile of unlike machines")
set(CPACK_PACKAGE_DESCRIPTION
    "Monkey turns laptops, GPU boxes and cluster nodes into one cluster for machine-learning
 research: training jobs, hyperparameter sweeps and actor apps, kept running through
 crashes and reproducible later.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME monkey)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "dataset-fashion-mnist, python3")
# CUDA's libraries (when the build found nvcc) come from NVIDIA's installer, not a Debian
# package: dpkg-shlibdeps treats them as private instead of failing on them.
if(CMAKE_CUDA_COMPILER)
  get_filename_component(cuda_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
      "${cuda_root}/../lib;${cuda_root}/../lib64;${cuda_root}/../targets/x86_64-linux/lib")
endif()

set(CPACK_DEBIAN_DEV_PACKAGE_NAME monkey-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "monkey (= ${PROJECT_VERSION}), libcaf-dev, libmsgpack-cxx-dev, cmake (>= 3.18), g++")
include(CPack)
