# SPDX-License-Identifier: MIT
# zkd-loadgen (tools/loadgen). Included at the end of tests/CMakeLists.txt.
if(NOT TARGET zkd_loadgen_core)
    return()
endif()

# Its pure parts (histogram, options, mntr parsing, JSON report) are unit-tested in
# zkd_unit_tests (tests/unit/tools/loadgen/*_test.cpp), which needs the library.
target_link_libraries(zkd_unit_tests PRIVATE zkd::loadgen_core)

# The real binaries against the fixture's ZooKeeper: `zkd run` processes and zkd-loadgen.
zkd_integration_test(loadgen integration/loadgen_test.cpp)
