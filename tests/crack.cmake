# SPDX-License-Identifier: MIT
# The distributed MD5 crack job (src/roles/crack_job.*, docs/crack.md) against a real ZooKeeper.
zkd_integration_test(roles_crack integration/roles_crack_test.cpp)
