# SPDX-License-Identifier: MIT
# Exec task types (src/handlers/exec*, docs/exec.md): real programs, a real ZooKeeper, and real
# `zkd run` processes.
zkd_integration_test(exec integration/exec_test.cpp)
target_compile_definitions(exec_test PRIVATE ZKD_BINARY="$<TARGET_FILE:zkd>")
add_dependencies(exec_test zkd)
target_compile_definitions(exec_test PRIVATE ZKD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# Served exec types (docs/exec.md "Serve mode"): real `zkd run` processes and a real served
# program (tests/programs/served.py).
zkd_integration_test(serve integration/serve_test.cpp)
target_compile_definitions(serve_test PRIVATE ZKD_BINARY="$<TARGET_FILE:zkd>")
add_dependencies(serve_test zkd)
target_compile_definitions(serve_test PRIVATE ZKD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# Exec types' limits (docs/exec.md "Limits"): real `zkd run` processes and a real program
# that goes over them (tests/programs/hog.py), under rlimits and, where available, cgroup v2.
zkd_integration_test(limits integration/limits_test.cpp)
target_compile_definitions(limits_test PRIVATE ZKD_BINARY="$<TARGET_FILE:zkd>")
add_dependencies(limits_test zkd)
target_compile_definitions(limits_test PRIVATE ZKD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
