# SPDX-License-Identifier: MIT
# The Python module (python/zkd): pytest (Debian's python3 and python3-pytest) against real
# `zkd run` processes and a real ZooKeeper, with the build's binaries passed by environment.
# Plain builds only: the module is Python; the sanitizers look at zkd's own tests. A missing
# pytest fails the test (never a skip): tools/install-deps.sh installs it.
if(NOT ZKD_SANITIZE STREQUAL "")
    return()
endif()
find_program(ZKD_TEST_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT ZKD_TEST_PYTHON3)
    find_program(ZKD_TEST_PYTHON3 NAMES python3)
endif()
if(NOT ZKD_TEST_PYTHON3)
    set(ZKD_TEST_PYTHON3 python3)  # the test then fails, saying so
endif()
# -p no:cacheprovider: nothing written into the source tree.
set(zkd_pytest "${ZKD_TEST_PYTHON3}" -m pytest -p no:cacheprovider -q -ra
    --rootdir "${CMAKE_CURRENT_SOURCE_DIR}/python" "--basetemp=${CMAKE_CURRENT_BINARY_DIR}/python_tmp")
set(zkd_pytest_env
    "ZKD_BINARY=$<TARGET_FILE:zkd>"
    "ZKD_ZK_LOCAL=$<TARGET_FILE:zkd_zk_local_cli>"
    "ZKD_PYTHON_DIR=${PROJECT_SOURCE_DIR}/python"
    "PYTHONDONTWRITEBYTECODE=1")
# The serve loop over pipes, and the client's errors: no zkd, no ZooKeeper.
add_test(NAME python_unit
    COMMAND ${zkd_pytest} "${CMAKE_CURRENT_SOURCE_DIR}/python/test_serve.py"
            "${CMAKE_CURRENT_SOURCE_DIR}/python/test_errors.py")
set_tests_properties(python_unit PROPERTIES LABELS unit TIMEOUT 120
    ENVIRONMENT "${zkd_pytest_env}")
# The client, the examples, and serve mode end to end (marker serve_e2e).
add_test(NAME python_client
    COMMAND ${zkd_pytest} "${CMAKE_CURRENT_SOURCE_DIR}/python/test_client.py"
            "${CMAKE_CURRENT_SOURCE_DIR}/python/test_examples.py")
set_tests_properties(python_client PROPERTIES COST 30 LABELS integration TIMEOUT 600
    ENVIRONMENT "${zkd_pytest_env}")
