# SPDX-License-Identifier: MIT
# The tests that run the built programs from outside, as a user runs them, with no test binary
# of their own. Included from tests/CMakeLists.txt.

# Every program of the project answers --version with its name and the project's version.
foreach(tool zkd_loadgen zkd_chaos zkd_zk_local_cli zkd_swarm)
    if(TARGET ${tool})
        get_target_property(tool_name ${tool} OUTPUT_NAME)
        add_test(NAME ${tool}_version COMMAND ${tool} --version)
        set_tests_properties(${tool}_version PROPERTIES
            LABELS unit PASS_REGULAR_EXPRESSION "^${tool_name} ${PROJECT_VERSION}\n$")
    endif()
endforeach()

include(chaos.cmake)    # chaos rounds: faults injected into real zkd and ZooKeeper processes
include(python.cmake)   # pytest: the Python module against real zkd processes
include(install.cmake)  # cmake --install and the .deb
