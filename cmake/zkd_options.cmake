# SPDX-License-Identifier: MIT
# Compile options shared by every zkd target, as one INTERFACE target.
option(ZKD_WERROR "Treat warnings as errors" OFF)
option(ZKD_OPTIMIZE_TESTS "Compile the tests' own code with the build's optimisation (default: -O0)" OFF)
option(ZKD_TEST_PCH "Precompile the tests' common third-party headers (tools/test.sh's builds)" OFF)
option(ZKD_INTEGRATION_TESTS
    "Build and run the integration test binaries (OFF: the unit tests and those that run the programs)" ON)
set(ZKD_LINKER "" CACHE STRING
    "The linker for every target (-fuse-ld=...): empty for the compiler's default; tools/test.sh uses lld")
set(ZKD_SANITIZE "" CACHE STRING "Sanitizers: empty, 'address' (ASan+UBSan) or 'thread' (TSan)")
set_property(CACHE ZKD_SANITIZE PROPERTY STRINGS "" address thread)

add_library(zkd_options INTERFACE)
add_library(zkd::options ALIAS zkd_options)
# Installed and exported (the static libraries link it privately, cmake/zkd_install.cmake):
# an application built against an installed zkd gets the sanitizer link flags it needs, never
# our warnings, definitions or sanitizer compile flags (all BUILD_INTERFACE).
set(zkd_compile_options
    -Wall -Wextra -Wpedantic -Wshadow -Wold-style-cast -Wcast-align
    -Woverloaded-virtual -Wimplicit-fallthrough
    # GCC 12 false positives: Asio's coroutine-frame operator delete reported as mismatched,
    # and -Wrestrict on `"literal" + std::string` at -O3 (GCC PR 105329).
    $<$<CXX_COMPILER_ID:GNU>:-Wno-mismatched-new-delete>
    $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>
    $<$<BOOL:${ZKD_WERROR}>:-Werror>)
# A unity build (CMAKE_UNITY_BUILD=ON: tools/test.sh's builds, about half the compile time)
# includes several sources in one: a class one of them defines with a member of
# its own anonymous namespace's type then warns, although only that source uses it.
if(CMAKE_UNITY_BUILD)
    list(APPEND zkd_compile_options $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
endif()
set(zkd_compile_definitions BOOST_ASIO_NO_DEPRECATED BOOST_ASIO_DISABLE_BOOST_COROUTINE)

if(ZKD_SANITIZE STREQUAL "address")
    # UBSan without its null and alignment checks: with GCC they make the -O0 build about a
    # third slower (the coroutine-heavy code checks every access), ASan itself reports a null
    # dereference, and the fuzz build (clang, tools/fuzz.sh), which feeds the parsers raw
    # bytes, keeps the whole of UBSan.
    list(APPEND zkd_compile_options
        -fsanitize=address,undefined -fno-sanitize=alignment,null -fno-omit-frame-pointer
        -fno-sanitize-recover=undefined)
    target_link_options(zkd_options INTERFACE -fsanitize=address,undefined)
    # Our programs linked at a fixed address: an ASan+UBSan program holds some 850,000
    # relocations (the checks' descriptors), which a position-independent one applies at each
    # start. `zkd route` started in 0.12 s instead of 0.21 (the tests start hundreds of them).
    target_link_options(zkd_options INTERFACE
        "$<BUILD_INTERFACE:$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>>")
elseif(ZKD_SANITIZE STREQUAL "thread")
    # GCC warns that TSan does not model the fences Asio uses (-Wtsan); TSan still sees the
    # locks and atomics around them.
    list(APPEND zkd_compile_options -fsanitize=thread -fno-omit-frame-pointer
        $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)
    target_link_options(zkd_options INTERFACE -fsanitize=thread)
elseif(NOT ZKD_SANITIZE STREQUAL "")
    message(FATAL_ERROR "ZKD_SANITIZE must be empty, 'address' or 'thread', not '${ZKD_SANITIZE}'")
endif()
target_compile_options(zkd_options INTERFACE "$<BUILD_INTERFACE:${zkd_compile_options}>")
target_compile_definitions(zkd_options INTERFACE "$<BUILD_INTERFACE:${zkd_compile_definitions}>")

# The test builds link some 80 programs, each with the static libraries: lld takes about 0.3x
# the CPU time of GNU ld for one (an ASan integration test: 0.8 against 2.9 s). Checked here,
# so that a missing linker is a clear error.
if(NOT ZKD_LINKER STREQUAL "")
    include(CheckLinkerFlag)
    check_linker_flag(CXX "-fuse-ld=${ZKD_LINKER}" zkd_linker_${ZKD_LINKER}_works)
    if(NOT zkd_linker_${ZKD_LINKER}_works)
        message(FATAL_ERROR "ZKD_LINKER=${ZKD_LINKER}: the compiler cannot link with -fuse-ld=${ZKD_LINKER}"
                            " (install it, e.g. apt-get install ${ZKD_LINKER}, or leave ZKD_LINKER empty)")
    endif()
    add_link_options("-fuse-ld=${ZKD_LINKER}")
endif()
