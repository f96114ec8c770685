# SPDX-License-Identifier: MIT
# Finds the ZooKeeper C client, which ships no CMake or pkg-config file, and defines
# ZooKeeper::zookeeper_st: the single-threaded client, which zkco drives from its Asio
# executor (no client threads, no thread hop per reply). Debian lets only one of
# libzookeeper-mt-dev and libzookeeper-st-dev be installed; their headers are identical, so
# the headers come from libzookeeper-mt-dev and the library from libzookeeper-st2, which has
# no unversioned .so link, hence the versioned name.
find_path(ZooKeeper_INCLUDE_DIR NAMES zookeeper/zookeeper.h)
find_library(ZooKeeper_ST_LIBRARY NAMES zookeeper_st libzookeeper_st.so.2)

if(ZooKeeper_INCLUDE_DIR AND EXISTS "${ZooKeeper_INCLUDE_DIR}/zookeeper/zookeeper_version.h")
    file(STRINGS "${ZooKeeper_INCLUDE_DIR}/zookeeper/zookeeper_version.h" _zk_version_line
         REGEX "#define ZOO_VERSION \"[0-9.]+\"")
    string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" ZooKeeper_VERSION "${_zk_version_line}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeper
    REQUIRED_VARS ZooKeeper_ST_LIBRARY ZooKeeper_INCLUDE_DIR
    VERSION_VAR ZooKeeper_VERSION
    FAIL_MESSAGE "ZooKeeper C client not found: install libzookeeper-mt-dev and libzookeeper-st2 (tools/install-deps.sh)")

if(ZooKeeper_FOUND AND NOT TARGET ZooKeeper::zookeeper_st)
    # No THREADED: it would hide zookeeper_interest and zookeeper_process.
    add_library(ZooKeeper::zookeeper_st UNKNOWN IMPORTED)
    set_target_properties(ZooKeeper::zookeeper_st PROPERTIES
        IMPORTED_LOCATION "${ZooKeeper_ST_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}")
endif()
mark_as_advanced(ZooKeeper_INCLUDE_DIR ZooKeeper_ST_LIBRARY)
