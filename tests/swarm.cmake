# SPDX-License-Identifier: MIT
# zkd-swarm (tools/swarm). Included at the end of tests/CMakeLists.txt.
if(NOT TARGET zkd_swarm)
    return()
endif()

# Its command line is unit-tested in zkd_unit_tests (tests/unit/tools/swarm/*_test.cpp).
target_link_libraries(zkd_unit_tests PRIVATE zkd::swarm_core)

# A hundred workers in one zkd-swarm against a real `zkd run` master and zkd-loadgen.
zkd_integration_test(swarm integration/swarm_test.cpp)
