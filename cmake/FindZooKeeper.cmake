# SPDX-License-Identifier: MIT
# Finds the ZooKeeper C client (Debian: libzookeeper-mt-dev), which ships no CMake or
# pkg-config file. Defines ZooKeeper::zookeeper_mt, the multi-threaded client, with THREADED
# set as its users must compile with it.
find_path(ZooKeeper_INCLUDE_DIR NAMES zookeeper/zookeeper.h)
find_library(ZooKeeper_MT_LIBRARY NAMES zookeeper_mt)

if(ZooKeeper_INCLUDE_DIR AND EXISTS "${ZooKeeper_INCLUDE_DIR}/zookeeper/zookeeper_version.h")
    file(STRINGS "${ZooKeeper_INCLUDE_DIR}/zookeeper/zookeeper_version.h" _zk_version_line
         REGEX "#define ZOO_VERSION \"[0-9.]+\"")
    string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" ZooKeeper_VERSION "${_zk_version_line}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeper
    REQUIRED_VARS ZooKeeper_MT_LIBRARY ZooKeeper_INCLUDE_DIR
    VERSION_VAR ZooKeeper_VERSION
    FAIL_MESSAGE "ZooKeeper C client not found: install libzookeeper-mt-dev (tools/install-deps.sh)")

if(ZooKeeper_FOUND AND NOT TARGET ZooKeeper::zookeeper_mt)
    add_library(ZooKeeper::zookeeper_mt UNKNOWN IMPORTED)
    set_target_properties(ZooKeeper::zookeeper_mt PROPERTIES
        IMPORTED_LOCATION "${ZooKeeper_MT_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}"
        INTERFACE_COMPILE_DEFINITIONS THREADED)
    target_link_libraries(ZooKeeper::zookeeper_mt INTERFACE Threads::Threads)
endif()
mark_as_advanced(ZooKeeper_INCLUDE_DIR ZooKeeper_MT_LIBRARY)
