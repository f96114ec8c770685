# SPDX-License-Identifier: MIT
# `cmake --install BUILD --prefix P`: the programs (component `runtime`), the public headers,
# the static libraries and the CMake package `zkd` (component `dev`), so that an application
# does `find_package(zkd CONFIG REQUIRED)` + `target_link_libraries(app PRIVATE zkd::roles)`.
# Included from the top-level CMakeLists.txt after every target is defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZKD_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/zkd" CACHE STRING
    "Where the zkd CMake package goes, relative to the install prefix")
set(ZKD_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/zkd")

# Programs an operator or user runs: zkd itself, the load generator, a local ZooKeeper for
# trying it out, and the fault-injection run that checks a build on a machine. Not the
# developer tools of zkco itself (zkd-zkco-smoke, zkd-zkco-bench).
set(zkd_programs zkd)
foreach(program IN ITEMS zkd_loadgen zkd_zk_local_cli zkd_chaos zkd_swarm)
    if(TARGET ${program})
        list(APPEND zkd_programs ${program})
    endif()
endforeach()
install(TARGETS ${zkd_programs} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT runtime)
# The supervisor every exec-type program runs under: not a command, so not on PATH. An
# application linking zkd::handlers finds it here (or through ZKD_SUPERVISE).
install(TARGETS zkd_supervise RUNTIME DESTINATION "${CMAKE_INSTALL_LIBEXECDIR}/zkd" COMPONENT runtime)

# The libraries an application links, and every target of ours they link (the closure, so a
# library added under src/ and linked by these is exported with them, instead of failing
# install(EXPORT) at configure time). Static libraries carry their PRIVATE dependencies as
# link-only ones: zkd::options gives consumers of a sanitizer build its link flags; its
# warnings and definitions are BUILD_INTERFACE (cmake/zkd_options.cmake).
set(zkd_exported)
function(zkd_collect_exported target)
    if(NOT TARGET ${target})
        return()
    endif()
    get_target_property(aliased ${target} ALIASED_TARGET)
    if(aliased)
        set(target ${aliased})
    endif()
    get_target_property(imported ${target} IMPORTED)
    if(imported OR target IN_LIST zkd_exported)
        return()
    endif()
    list(APPEND zkd_exported ${target})
    foreach(property IN ITEMS LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
        get_target_property(deps ${target} ${property})
        foreach(dep IN LISTS deps)
            # Plain names and imported targets (Boost::json, ...) end the walk above.
            string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
            zkd_collect_exported(${dep})
        endforeach()
    endforeach()
    set(zkd_exported ${zkd_exported} PARENT_SCOPE)
endfunction()
foreach(library IN ITEMS zkd_zkco zkd_reactor zkd_protocol zkd_workflow zkd_handlers zkd_roles zkd_http)
    zkd_collect_exported(${library})
endforeach()
foreach(target IN LISTS zkd_exported)
    string(REGEX REPLACE "^zkd_" "" short "${target}")
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${short})
    # Every public header needs C++20 (coroutines): say so to consumers of each library.
    target_compile_features(${target} INTERFACE cxx_std_20)
endforeach()
install(TARGETS ${zkd_exported} EXPORT zkdTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev
        INCLUDES DESTINATION "${ZKD_INSTALL_INCLUDEDIR}")

# Headers by directory: files added to these directories are installed without a list to
# keep; a detail/ folder is private to its room and not installed. They include each other
# as "roles/node.hpp", so include/zkd is the include path.
foreach(dir IN ITEMS zkco reactor protocol workflow handlers roles http)
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/src/${dir}" DESTINATION "${ZKD_INSTALL_INCLUDEDIR}"
            COMPONENT dev FILES_MATCHING PATTERN "*.hpp" PATTERN "detail" EXCLUDE)
endforeach()

install(EXPORT zkdTargets NAMESPACE zkd:: DESTINATION "${ZKD_INSTALL_CMAKEDIR}" COMPONENT dev)
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/zkdConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/zkdConfig.cmake" INSTALL_DESTINATION "${ZKD_INSTALL_CMAKEDIR}")
# 0.x: a new minor version may change the API, so only the same minor version matches.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/zkdConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/zkdConfig.cmake" "${PROJECT_BINARY_DIR}/zkdConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindZooKeeper.cmake"
        DESTINATION "${ZKD_INSTALL_CMAKEDIR}" COMPONENT dev)

# The Python module (python/zkd, docs/python.md), with the programs (component `runtime`, so
# in the .deb too), where the system's python3 finds it without PYTHONPATH: Debian's python3
# reads lib/python3/dist-packages under /usr (packages) and lib/python3.X/dist-packages under
# /usr/local (X: its minor version). So the prefix /usr gets lib/python3/dist-packages, any
# other prefix lib/python3.X/dist-packages (of the python3 found here), unless
# ZKD_INSTALL_PYTHONDIR says where (relative to the prefix). The prefix is known only at
# install time (`cmake --install --prefix P`, CPack's /usr): decided there.
find_program(ZKD_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT ZKD_PYTHON3)
    find_program(ZKD_PYTHON3 NAMES python3)
endif()
set(zkd_python_version "")
if(ZKD_PYTHON3)
    execute_process(COMMAND "${ZKD_PYTHON3}" -c "import sys; print('%d.%d' % sys.version_info[:2])"
        OUTPUT_VARIABLE zkd_python_version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
set(ZKD_INSTALL_PYTHONDIR "" CACHE STRING
    "Where the Python module zkd goes, relative to the install prefix (default: lib/python3/dist-packages for /usr, else lib/python3.X/dist-packages)")
install(CODE "
    set(zkd_pydir \"${ZKD_INSTALL_PYTHONDIR}\")
    if(zkd_pydir STREQUAL \"\")
        if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" OR \"${zkd_python_version}\" STREQUAL \"\")
            set(zkd_pydir lib/python3/dist-packages)
        else()
            set(zkd_pydir lib/python${zkd_python_version}/dist-packages)
        endif()
    endif()
    file(INSTALL \"${PROJECT_SOURCE_DIR}/python/zkd\"
         DESTINATION \"\${CMAKE_INSTALL_PREFIX}/\${zkd_pydir}\"
         FILES_MATCHING PATTERN \"*.py\" PATTERN \"__pycache__\" EXCLUDE)
" COMPONENT runtime)
