// SPDX-License-Identifier: MIT
#include "handlers/builtin.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>

namespace zkd::handlers {

namespace json = boost::json;

namespace {

handler_error bad_args(std::string_view type, const std::string& message) {
    return handler_error{std::string(codes::bad_args), std::string(type) + ": " + message};
}

// Reads the duration of sleep and spin: {"ms": n} or a bare n.
boost::system::result<std::int64_t, handler_error> duration_arg(
    std::string_view type, const json::value& args
) {
    const json::value* ms = &args;
    if (const json::object* obj = args.if_object()) {
        ms = obj->if_contains("ms");
        if (ms == nullptr)
            return bad_args(type, "expects {\"ms\": n} or a bare number of milliseconds");
    }
    const auto n = protocol::as_int64(*ms);
    if (!n)
        return bad_args(type, "\"ms\" must be an integer number of milliseconds");
    if (*n < 0 || *n > max_builtin_ms) {
        return bad_args(
            type, "\"ms\" must be within 0.." + std::to_string(max_builtin_ms) + ", not " +
                      std::to_string(*n)
        );
    }
    return *n;
}

handler_result echo_task(const json::value& args, std::stop_token /*stop*/) {
    return args;
}

handler_result sum_task(const json::value& args, std::stop_token /*stop*/) {
    const json::array* values = args.if_array();
    if (const json::object* obj = args.if_object()) {
        const json::value* v = obj->if_contains("values");
        values = v == nullptr ? nullptr : v->if_array();
    }
    if (values == nullptr)
        return bad_args("sum", "expects {\"values\": [numbers]} or an array of numbers");

    std::int64_t int_sum = 0;
    double double_sum = 0;
    bool saw_double = false;
    constexpr auto int_max = std::numeric_limits<std::int64_t>::max();
    constexpr auto int_min = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < values->size(); ++i) {
        const json::value& v = (*values)[i];
        const auto where = "values[" + std::to_string(i) + "]";
        std::int64_t n = 0;
        switch (v.kind()) {
        case json::kind::int64:
            n = v.get_int64();
            break;
        case json::kind::uint64:
            if (v.get_uint64() > static_cast<std::uint64_t>(int_max))
                return bad_args("sum", where + " is beyond the int64 range");
            n = static_cast<std::int64_t>(v.get_uint64());
            break;
        case json::kind::double_:
            double_sum += v.get_double();
            saw_double = true;
            continue;
        default:
            return bad_args("sum", where + " is not a number");
        }
        if ((n > 0 && int_sum > int_max - n) || (n < 0 && int_sum < int_min - n))
            return bad_args("sum", "the integer sum overflows int64 at " + where);
        int_sum += n;
    }
    if (!saw_double)
        return json::object{{"sum", int_sum}};
    const double total = static_cast<double>(int_sum) + double_sum;
    if (!std::isfinite(total))
        return bad_args("sum", "the sum is not a finite number");
    return json::object{{"sum", total}};
}

handler_result sleep_task(const json::value& args, std::stop_token stop) {
    const auto ms = duration_arg("sleep", args);
    if (!ms)
        return ms.error();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*ms);
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    // The stop_token overload registers a stop_callback that notifies cv, so a stop wakes us
    // at once; nothing else ever notifies, hence the always-false predicate.
    cv.wait_until(lock, stop, deadline, [] { return false; });
    if (stop.stop_requested())
        return handler_error{std::string(codes::cancelled), "sleep cancelled"};
    return json::object{{"slept_ms", *ms}};
}

handler_result spin_task(const json::value& args, std::stop_token stop) {
    const auto ms = duration_arg("spin", args);
    if (!ms)
        return ms.error();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*ms);
    // Batches of xorshift steps: a few microseconds each, so stop is seen quickly while the
    // clock is not read on every step.
    constexpr std::uint64_t batch = 4096;
    std::uint64_t x = 0x9E3779B97F4A7C15ULL;
    std::uint64_t iterations = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (stop.stop_requested()) {
            return handler_error{
                std::string(codes::cancelled),
                "spin cancelled after " + std::to_string(iterations) + " iterations"};
        }
        for (std::uint64_t i = 0; i < batch; ++i) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        iterations += batch;
    }
    // Publishing the state keeps the optimizer from dropping the work.
    [[maybe_unused]] volatile std::uint64_t sink = x;
    return json::object{{"spun_ms", *ms}, {"iterations", static_cast<std::int64_t>(iterations)}};
}

handler_result fail_task(const json::value& args, std::stop_token /*stop*/) {
    const json::value* message = &args;
    if (const json::object* obj = args.if_object())
        message = obj->if_contains("message");
    if (message == nullptr || message->is_null())
        return handler_error{std::string(codes::handler_error), "the fail task always fails"};
    if (!message->is_string())
        return bad_args("fail", "expects {\"message\": string}, a bare string, or nothing");
    return handler_error{std::string(codes::handler_error), std::string(message->get_string())};
}

[[noreturn]] handler_result crash_task(const json::value& /*args*/, std::stop_token /*stop*/) {
    spdlog::critical("crash task: calling std::abort() on purpose (poison-task test)");
    spdlog::default_logger()->flush();
    std::abort();
}

}  // namespace

void add_builtin_handlers(registry& reg, bool with_crash) {
    // echo copies its args, fail builds a message: neither waits nor loops, so they run on
    // the worker's loop. sum loops over its values (a big array takes a while): the pool.
    reg.add_inline("echo", echo_task);
    reg.add("sum", sum_task);
    reg.add("sleep", sleep_task);
    reg.add("spin", spin_task);
    reg.add_inline("fail", fail_task);
    if (with_crash) {
        reg.add("crash", crash_task);
    }
}

}  // namespace zkd::handlers
