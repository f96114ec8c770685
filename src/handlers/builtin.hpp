// SPDX-License-Identifier: MIT
#pragma once

#include "handlers/registry.hpp"

#include <cstdint>

namespace zkd::handlers {

/// Upper bound of the `ms` argument of `sleep` and `spin`: 24 hours.
inline constexpr std::int64_t max_builtin_ms = std::int64_t{24} * 60 * 60 * 1000;

/// Registers the built-in task types (each returns bad_args for arguments of the wrong
/// shape, never crashes or hangs on them, except `crash`); `echo` and `fail` with
/// registry::add_inline (the worker runs them on its loop: they neither wait nor loop), the
/// others on the compute pool:
/// - `echo`: yields its args unchanged.
/// - `sum`: {"values": [numbers]} or a bare array -> {"sum": n}. Integers add exactly as
///   int64 (overflow is bad_args); any double makes the sum a double.
/// - `sleep`: {"ms": n} or a bare n, 0..24h -> {"slept_ms": n}; wakes at once when stopped.
/// - `spin`: like sleep but burns CPU -> {"spun_ms": n, "iterations": k}.
/// - `fail`: always fails with handler_error; message from {"message": s} or a bare s.
/// - `crash`, only with `with_crash`: **CALLS std::abort() AND KILLS THE WHOLE WORKER
///   PROCESS**, whatever its args. It exists to test poison-task quarantine (a task that
///   keeps killing workers ends as `lost`); any client that can submit tasks could take
///   workers down with it, so it is off unless asked for (`zkd run --enable-crash-task`).
/// Throws std::invalid_argument if one of these types is already registered.
void add_builtin_handlers(registry& reg, bool with_crash = false);

}  // namespace zkd::handlers
