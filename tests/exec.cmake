# SPDX-License-Identifier: MIT
# Exec task types (src/handlers/exec*, docs/exec.md): real programs, a real ZooKeeper, and real
# `zkd run` processes.
zkd_integration_test(exec integration/exec_test.cpp)
target_compile_definitions(exec_test PRIVATE ZKD_BINARY="$<TARGET_FILE:zkd>")
add_dependencies(exec_test zkd)
target_compile_definitions(exec_test PRIVATE ZKD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
