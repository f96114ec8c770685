# SPDX-License-Identifier: MIT
# The HTTP facade (src/http) and the cluster inspection API (roles/client/inspect).

# Unit tests of src/http (tests/unit/http/*_test.cpp) are in zkd_unit_tests.
target_link_libraries(zkd_unit_tests PRIVATE zkd::http)
# http_grafana_test.cpp checks the dashboard against what render_metrics() exports.
target_compile_definitions(zkd_unit_tests PRIVATE
    ZKD_GRAFANA_DASHBOARD="${PROJECT_SOURCE_DIR}/docs/grafana/zkd.json")

# Against the real ZooKeeper.
zkd_integration_test(roles_inspect integration/roles_inspect_test.cpp)
# The API through its client, and `zkd run --http` itself, for its flags (token, TLS,
# exposure rules).
zkd_integration_test(http integration/http_test.cpp)
# The status page in headless Chromium (Debian package chromium), against real zkd processes.
zkd_integration_test(status_page integration/status_page_test.cpp)
