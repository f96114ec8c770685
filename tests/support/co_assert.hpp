// SPDX-License-Identifier: MIT
// Makes GoogleTest's fatal assertions (ASSERT_*) usable inside coroutines, where their
// `return` is not allowed: the failure is recorded, then a fatal_failure is thrown, which
// run_co lets through and the zk_test fixture's run() swallows (the test already failed).
#pragma once

#include <gtest/gtest.h>

namespace zkd::test {

struct fatal_failure {};

/// Throws when destroyed, i.e. at the end of the assertion's full expression, after the
/// failure and its streamed message have been recorded.
struct throw_after_assertion {
    throw_after_assertion() = default;
    throw_after_assertion(const throw_after_assertion&) = delete;
    throw_after_assertion& operator=(const throw_after_assertion&) = delete;
    ~throw_after_assertion() noexcept(false) { throw fatal_failure{}; }
};

}  // namespace zkd::test

#undef GTEST_FATAL_FAILURE_
#define GTEST_FATAL_FAILURE_(message)     \
    ::zkd::test::throw_after_assertion{}, \
        GTEST_MESSAGE_(message, ::testing::TestPartResult::kFatalFailure)
