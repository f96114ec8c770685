// SPDX-License-Identifier: MIT
// Exec types, private: how their sources say a setting is wrong, a task failed, or a
// program was killed (config.cpp, exec_type.cpp, serve.cpp).
#pragma once

#include "handlers/registry.hpp"

#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace zkd::handlers::exec::detail {

/// A setting or a start-up check failed: the message names the type and what to fix.
[[noreturn]] inline void bad(const std::string& message) {
    throw std::invalid_argument(message);
}

/// A task's failure with `code` (docs/exec.md lists them).
inline handler_error fail(std::string_view code, std::string message) {
    return handler_error{std::string(code), std::move(message)};
}

/// "SIGKILL", or "signal 64" for a signal without a name.
inline std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

}  // namespace zkd::handlers::exec::detail
