# SPDX-License-Identifier: MIT
# The crack application (src/apps/crack/, docs/crack.md): its pure parts in the unit tests,
# the job against a real ZooKeeper here.
target_link_libraries(zkd_unit_tests PRIVATE zkd::crack)
zkd_integration_test(crack integration/crack_test.cpp)
