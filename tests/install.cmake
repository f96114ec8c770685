# SPDX-License-Identifier: MIT
# Installing and packaging (cmake/zkd_install.cmake, cmake/zkd_package.cmake). Included from
# tests/CMakeLists.txt. Plain builds only: they check the CMake package and the .deb, not
# memory behaviour (the embedding example runs under the sanitizers as the `examples` test).
if(NOT ZKD_SANITIZE STREQUAL "")
    return()
endif()

# `cmake --install` into a fresh prefix, examples/ built against it alone and run against a
# real ZooKeeper. Reuses this build (no second build of zkd); the example is one file.
add_test(NAME install
    COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh" "${CMAKE_COMMAND}" "${PROJECT_BINARY_DIR}"
            "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_BINARY_DIR}/install_test" "${PROJECT_VERSION}"
            "${CMAKE_GENERATOR}" "${CMAKE_CXX_COMPILER}" "${CMAKE_CXX_COMPILER_LAUNCHER}")
set_tests_properties(install PROPERTIES COST 30 LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77)

# tools/package.sh on this build, the .deb's contents, dependencies and unit, and an install
# into a scratch root (tests/package_test.sh says what it covers and what not).
add_test(NAME package
    COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/package_test.sh" "${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}"
            "${CMAKE_CURRENT_BINARY_DIR}/package_test" "${PROJECT_VERSION}")
set_tests_properties(package PROPERTIES COST 30 LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77)
