# SPDX-License-Identifier: MIT
# Exec task types (src/handlers/exec*, docs/exec.md): real programs, a real ZooKeeper, and real
# `zkd run` processes.
zkd_integration_test(exec integration/exec_test.cpp)

# Served exec types (docs/exec.md "Serve mode"): real `zkd run` processes and a real served
# program (tests/programs/served.py).
zkd_integration_test(serve integration/serve_test.cpp)

# Exec types' limits (docs/exec.md "Limits"): real `zkd run` processes and a real program
# that goes over them (tests/programs/hog.py), under rlimits and, where available, cgroup v2.
zkd_integration_test(limits integration/limits_test.cpp)
