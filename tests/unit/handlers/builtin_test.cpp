// SPDX-License-Identifier: MIT
// The built-in task types: happy paths, every bad-args shape, and cancellation from another
// thread (directly and through reactor::offload).
#include "handlers/builtin.hpp"

#include "handlers/registry.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/offload.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <latch>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using zkd::handlers::handler_result;
using zkd::handlers::registry;

// Generous: only a broken cancellation comes near it.
constexpr auto test_deadline = 60s;

const registry& builtins() {
    static const registry reg = [] {
        registry r;
        zkd::handlers::add_builtin_handlers(r, true);
        return r;
    }();
    return reg;
}

handler_result run(std::string_view type, std::string_view args_json, std::stop_token stop = {}) {
    return zkd::handlers::run_handler(builtins(), type, json::parse(args_json), std::move(stop));
}

json::value run_ok(std::string_view type, std::string_view args_json) {
    const auto r = run(type, args_json);
    if (r.has_error()) {
        ADD_FAILURE() << type << " " << args_json << " failed: " << r.error().code << ": "
                      << r.error().message;
        return nullptr;
    }
    return *r;
}

void expect_error(
    std::string_view type,
    std::string_view args_json,
    std::string_view code,
    std::stop_token stop = {}
) {
    const auto r = run(type, args_json, std::move(stop));
    ASSERT_TRUE(r.has_error()) << type << " " << args_json << " -> " << json::serialize(*r);
    EXPECT_EQ(r.error().code, code) << type << " " << args_json << ": " << r.error().message;
    EXPECT_FALSE(r.error().message.empty());
}

// Starts `type` on another thread, requests stop once the handler is running, and returns
// what it yields; fails the test if the handler ignores the stop past the deadline.
handler_result run_and_cancel(std::string_view type, std::string_view args_json) {
    std::latch started{1};
    registry probe;
    const auto* inner = builtins().find(type);
    if (inner == nullptr)
        throw std::logic_error("no such builtin");
    probe.add("probe", [&started, inner](const json::value& args, std::stop_token stop) {
        started.count_down();
        return (*inner)(args, std::move(stop));
    });
    const json::value args = json::parse(args_json);
    std::stop_source source;
    auto fut = std::async(std::launch::async, [&] {
        return zkd::handlers::run_handler(probe, "probe", args, source.get_token());
    });
    started.wait();
    source.request_stop();
    if (fut.wait_for(test_deadline) != std::future_status::ready) {
        ADD_FAILURE() << type << " ignored the stop request";
        return zkd::handlers::handler_error{"test", "deadline"};  // ~future still joins
    }
    return fut.get();
}

// Argument shapes that no duration-taking handler accepts.
const std::vector<std::string_view> bad_durations = {
    "-1",
    "86400001",
    R"("10")",
    "1.5",
    "1e300",
    "18446744073709551615",
    "null",
    "true",
    "[]",
    "[10]",
    "{}",
    R"({"ms":"10"})",
    R"({"ms":-5})",
    R"({"ms":null})",
    R"({"ms":86400001})",
    R"({"milliseconds":10})",
};

TEST(RolesBuiltin, RegistersEveryBuiltinType) {
    EXPECT_EQ(
        builtins().types(),
        (std::vector<std::string>{"crash", "echo", "fail", "sleep", "spin", "sum"})
    );
    registry reg;
    zkd::handlers::add_builtin_handlers(reg);
    // `crash` takes its worker down: only served when asked for.
    EXPECT_EQ(reg.find("crash"), nullptr);
    EXPECT_EQ(reg.types().size(), 5U);
    EXPECT_THROW(zkd::handlers::add_builtin_handlers(reg), std::invalid_argument);
}

TEST(RolesBuiltin, OnlyThoseThatNeitherWaitNorLoopRunOnTheLoop) {
    // echo copies its args and fail builds a message: on the worker's loop. sum loops over
    // its values, sleep and spin take their time: the compute pool.
    const auto& reg = builtins();
    EXPECT_TRUE(reg.runs_inline("echo"));
    EXPECT_TRUE(reg.runs_inline("fail"));
    for (const auto* type : {"sum", "sleep", "spin", "crash", "unknown"}) {
        EXPECT_FALSE(reg.runs_inline(type)) << type;
    }
    // Still an ordinary synchronous handler for whoever runs it elsewhere.
    EXPECT_NE(reg.find("echo"), nullptr);
    EXPECT_TRUE(reg.has_sync("echo"));
}

TEST(RolesBuiltinEcho, ReturnsArgsUnchanged) {
    for (const std::string_view args :
         {"null", "0", "-3.5", R"("text")", "[]", "{}", R"({"a":[1,{"b":true}],"c":null})"}) {
        EXPECT_EQ(run_ok("echo", args), json::parse(args)) << args;
    }
}

TEST(RolesBuiltinSum, SumsIntegersExactly) {
    EXPECT_EQ(run_ok("sum", R"({"values":[1,2,3]})"), json::parse(R"({"sum":6})"));
    EXPECT_EQ(run_ok("sum", "[1,2,3]"), json::parse(R"({"sum":6})"));
    EXPECT_EQ(run_ok("sum", "[]"), json::parse(R"({"sum":0})"));
    EXPECT_EQ(run_ok("sum", R"({"values":[],"extra":"ignored"})"), json::parse(R"({"sum":0})"));
    EXPECT_EQ(run_ok("sum", "[-5, 3]"), json::parse(R"({"sum":-2})"));
    // Beyond 2^53, where a double sum would round.
    EXPECT_EQ(run_ok("sum", "[9007199254740993, 1]"), json::parse(R"({"sum":9007199254740994})"));
    EXPECT_EQ(
        run_ok("sum", "[9223372036854775807, -1, 1]"), json::parse(R"({"sum":9223372036854775807})")
    );
    EXPECT_EQ(
        run_ok("sum", "[-9223372036854775807, -1]"), json::parse(R"({"sum":-9223372036854775808})")
    );
    const auto s = run_ok("sum", "[9223372036854775807]");
    ASSERT_TRUE(s.is_object());
    EXPECT_TRUE(s.at("sum").is_int64());
}

TEST(RolesBuiltinSum, DoublesMakeADoubleSum) {
    const auto s = run_ok("sum", "[1, 2.5, -0.5]");
    ASSERT_TRUE(s.is_object());
    ASSERT_TRUE(s.at("sum").is_double());
    EXPECT_DOUBLE_EQ(s.at("sum").get_double(), 3.0);
    EXPECT_DOUBLE_EQ(run_ok("sum", "[0.25]").at("sum").get_double(), 0.25);
}

TEST(RolesBuiltinSum, RejectsBadArgs) {
    for (const std::string_view args :
         {"null", "5", R"("1,2")", "true", "{}", R"({"values":5})", R"({"values":null})",
          R"({"values":{"a":1}})", R"({"vals":[1]})", R"([1,"2"])", "[1,null]", "[true]", "[[1]]",
          R"([{"n":1}])", R"({"values":[1,"x"]})",
          // int64 overflow, either way, and integers beyond int64
          "[9223372036854775807, 1]", "[-9223372036854775808, -1]", "[18446744073709551615]",
          "[9223372036854775808, -1]",
          // not finite
          "[1e308, 1e308]"}) {
        expect_error("sum", args, "bad_args");
    }
}

TEST(RolesBuiltinSleep, SleepsAtLeastTheTime) {
    const auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(run_ok("sleep", R"({"ms":20})"), json::parse(R"({"slept_ms":20})"));
    EXPECT_GE(std::chrono::steady_clock::now() - before, 20ms);
    EXPECT_EQ(run_ok("sleep", "0"), json::parse(R"({"slept_ms":0})"));
    EXPECT_EQ(run_ok("sleep", "1.0"), json::parse(R"({"slept_ms":1})"));
}

TEST(RolesBuiltinSleep, RejectsBadArgs) {
    for (const auto args : bad_durations)
        expect_error("sleep", args, "bad_args");
}

TEST(RolesBuiltinSleep, AlreadyStoppedReturnsCancelledAtOnce) {
    std::stop_source source;
    source.request_stop();
    // The 24 h maximum is accepted; only the stop keeps the test short.
    expect_error("sleep", R"({"ms":86400000})", "cancelled", source.get_token());
}

TEST(RolesBuiltinSleep, StopFromAnotherThreadWakesIt) {
    const auto r = run_and_cancel("sleep", R"({"ms":86400000})");
    ASSERT_TRUE(r.has_error());
    EXPECT_EQ(r.error().code, "cancelled") << r.error().message;
}

TEST(RolesBuiltinSpin, SpinsForTheTime) {
    const auto before = std::chrono::steady_clock::now();
    const auto s = run_ok("spin", R"({"ms":10})");
    EXPECT_GE(std::chrono::steady_clock::now() - before, 10ms);
    ASSERT_TRUE(s.is_object());
    EXPECT_EQ(s.at("spun_ms"), json::value(10));
    ASSERT_TRUE(s.at("iterations").is_int64());
    EXPECT_GE(s.at("iterations").get_int64(), 0);
    EXPECT_EQ(run_ok("spin", "0"), json::parse(R"({"spun_ms":0,"iterations":0})"));
}

TEST(RolesBuiltinSpin, RejectsBadArgs) {
    for (const auto args : bad_durations)
        expect_error("spin", args, "bad_args");
}

TEST(RolesBuiltinSpin, StopFromAnotherThreadEndsIt) {
    const auto r = run_and_cancel("spin", "86400000");
    ASSERT_TRUE(r.has_error());
    EXPECT_EQ(r.error().code, "cancelled") << r.error().message;
}

TEST(RolesBuiltinFail, AlwaysFailsWithTheGivenMessage) {
    for (const auto& [args, message] : std::vector<std::pair<std::string_view, std::string>>{
             {R"({"message":"disk full"})", "disk full"},
             {R"("bare")", "bare"},
             {R"({"message":""})", ""},
         }) {
        const auto r = run("fail", args);
        ASSERT_TRUE(r.has_error()) << args;
        EXPECT_EQ(r.error(), (zkd::handlers::handler_error{"handler_error", message})) << args;
    }
    for (const std::string_view args : {"null", "{}", R"({"other":1})"})
        expect_error("fail", args, "handler_error");
}

TEST(RolesBuiltinFail, RejectsBadArgs) {
    for (const std::string_view args : {"5", "true", "[]", R"({"message":5})", R"({"message":[]})"})
        expect_error("fail", args, "bad_args");
}

TEST(RolesBuiltinCrashDeathTest, AbortsTheProcess) {
    // Other tests leave threads behind; re-executing the binary keeps the child sane.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const auto* crash = builtins().find("crash");
    ASSERT_NE(crash, nullptr);
    EXPECT_DEATH((void)zkd::handlers::run_handler(builtins(), "crash", nullptr, {}), "");
    EXPECT_DEATH((void)zkd::handlers::run_handler(builtins(), "crash", json::array{1, 2}, {}), "");
}

// The worker's path: the handler runs on the compute pool through offload, and cancelling
// the awaiting coroutine sets the handler's stop token.
TEST(RolesBuiltinOffload, CancellingTheCoroutineCancelsTheHandler) {
    asio::io_context ioc;
    zkd::reactor::compute_pool pool{1};
    asio::cancellation_signal signal;
    const json::value args = json::parse(R"({"ms":86400000})");

    auto job = [&](std::stop_token stop) {
        // post() is thread-safe; the signal itself is only touched on the io_context thread.
        asio::post(ioc, [&] { signal.emit(asio::cancellation_type::terminal); });
        return zkd::handlers::run_handler(builtins(), "sleep", args, std::move(stop));
    };
    std::optional<handler_result> result;
    // Named, so the closure outlives the coroutine that refers to it; the result is stored
    // from inside because a by-value handler_result completion trips a GCC 12
    // -Wmaybe-uninitialized false positive under ASan.
    auto co = [&]() -> asio::awaitable<void> {
        result.emplace(co_await zkd::reactor::offload(pool, std::move(job)));
    };
    bool threw = false;
    asio::co_spawn(
        ioc, co(),
        asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e) { threw = !!e; })
    );
    ioc.run_for(test_deadline);
    EXPECT_FALSE(threw);
    ASSERT_TRUE(result.has_value()) << "the handler did not finish before the deadline";
    ASSERT_TRUE(result->has_error());
    EXPECT_EQ(result->error().code, "cancelled");
}

}  // namespace

}  // namespace ZKD_UNITY_ID
