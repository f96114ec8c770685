# SPDX-License-Identifier: MIT
# The HTTP facade (src/http) and the cluster inspection API (roles/inspect).

# Unit tests of src/http (tests/unit/http_*_test.cpp) are in zkd_unit_tests.
target_link_libraries(zkd_unit_tests PRIVATE zkd::http)

# Against the real ZooKeeper.
zkd_integration_test(roles_inspect integration/roles_inspect_test.cpp)
zkd_integration_test(http integration/http_test.cpp)
target_link_libraries(http_test PRIVATE zkd::http)
# `zkd run --http` itself, for its flags (token, TLS, exposure rules).
target_compile_definitions(http_test PRIVATE ZKD_BINARY="$<TARGET_FILE:zkd>")
add_dependencies(http_test zkd)
