// SPDX-License-Identifier: MIT
// The task handler registry and run_handler: names, lookup, and turning every way a handler
// can go wrong into an error result.
#include "handlers/registry.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace json = boost::json;
using zkd::handlers::handler_error;
using zkd::handlers::handler_exception;
using zkd::handlers::handler_result;
using zkd::handlers::registry;
using zkd::handlers::run_handler;

handler_result ok_handler(const json::value& args, std::stop_token /*stop*/) {
    return args;
}

TEST(RolesRegistry, FindsWhatWasAddedAndListsTypesSorted) {
    registry reg;
    EXPECT_TRUE(reg.types().empty());
    EXPECT_EQ(reg.find("echo"), nullptr);

    reg.add("zeta", ok_handler);
    const auto* zeta = reg.find("zeta");
    ASSERT_NE(zeta, nullptr);
    reg.add("alpha", ok_handler);
    reg.add("Mid-1.2:x_y", ok_handler);
    // Later adds keep earlier pointers valid.
    EXPECT_EQ(reg.find("zeta"), zeta);
    EXPECT_NE(reg.find("alpha"), nullptr);
    EXPECT_EQ(reg.find("ALPHA"), nullptr);
    EXPECT_EQ(reg.find("alph"), nullptr);
    EXPECT_EQ(reg.types(), (std::vector<std::string>{"Mid-1.2:x_y", "alpha", "zeta"}));
}

TEST(RolesRegistry, RejectsBadNamesDuplicatesAndEmptyHandlers) {
    registry reg;
    const std::string longest(128, 'x');
    EXPECT_NO_THROW(reg.add(longest, ok_handler));
    EXPECT_NO_THROW(reg.add("a", ok_handler));
    EXPECT_NO_THROW(reg.add("AZaz09_.:-", ok_handler));
    for (const std::string& bad :
         {std::string(), std::string(129, 'x'), std::string("a b"), std::string("a/b"),
          std::string("caf\xc3\xa9"), std::string("tab\t"), std::string("nul\0x", 5)}) {
        EXPECT_FALSE(zkd::handlers::is_valid_type_name(bad)) << bad;
        EXPECT_THROW(reg.add(bad, ok_handler), std::invalid_argument) << bad;
    }
    EXPECT_THROW(reg.add("a", ok_handler), std::invalid_argument);
    EXPECT_THROW(reg.add("empty", zkd::handlers::task_handler{}), std::invalid_argument);
    EXPECT_EQ(reg.find("empty"), nullptr);
    EXPECT_EQ(reg.types().size(), 3U);
}

TEST(RolesRegistry, InlineHandlersAreSynchronousHandlersMarkedSo) {
    registry reg;
    reg.add_inline("quick", ok_handler);
    reg.add("pooled", ok_handler);
    EXPECT_TRUE(reg.runs_inline("quick"));
    EXPECT_FALSE(reg.runs_inline("pooled"));
    EXPECT_FALSE(reg.runs_inline("missing"));
    ASSERT_NE(reg.find("quick"), nullptr);
    EXPECT_TRUE(reg.has_sync("quick"));
    EXPECT_EQ(reg.find_async("quick"), nullptr);
    EXPECT_EQ(run_handler(reg, "quick", json::value(3), {}).value(), json::value(3));
    // The same rules as add().
    EXPECT_THROW(reg.add_inline("quick", ok_handler), std::invalid_argument);
    EXPECT_THROW(reg.add_inline("a b", ok_handler), std::invalid_argument);
    EXPECT_THROW(reg.add_inline("empty", zkd::handlers::task_handler{}), std::invalid_argument);
}

TEST(RolesRegistry, UnknownTypeIsAnErrorNamingTheType) {
    registry reg;
    reg.add("known", ok_handler);
    const auto r = run_handler(reg, "nope.v2", json::value(1), {});
    ASSERT_TRUE(r.has_error());
    EXPECT_EQ(r.error().code, "unknown_type");
    EXPECT_NE(r.error().message.find("nope.v2"), std::string::npos) << r.error().message;
}

TEST(RolesRegistry, PassesArgsAndReturnsTheValue) {
    registry reg;
    reg.add("echo", ok_handler);
    const auto args = json::parse(R"({"a":[1,2,{"b":null}]})");
    const auto r = run_handler(reg, "echo", args, {});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, args);
}

TEST(RolesRegistry, ThrowingHandlersBecomeHandlerErrors) {
    registry reg;
    reg.add("std", [](const json::value&, std::stop_token) -> handler_result {
        throw std::runtime_error("boom");
    });
    reg.add("other", [](const json::value&, std::stop_token) -> handler_result { throw 42; });
    reg.add("json", [](const json::value& args, std::stop_token) -> handler_result {
        // A typical handler bug: assuming a shape the args do not have.
        return json::value(args.as_object().at("missing").as_int64());
    });

    const auto r1 = run_handler(reg, "std", nullptr, {});
    ASSERT_TRUE(r1.has_error());
    EXPECT_EQ(r1.error(), (handler_error{"handler_error", "boom"}));

    const auto r2 = run_handler(reg, "other", nullptr, {});
    ASSERT_TRUE(r2.has_error());
    EXPECT_EQ(r2.error(), (handler_error{"handler_error", "unknown exception"}));

    const auto r3 = run_handler(reg, "json", json::array{1}, {});
    ASSERT_TRUE(r3.has_error());
    EXPECT_EQ(r3.error().code, "handler_error");
    EXPECT_FALSE(r3.error().message.empty());
}

TEST(RolesRegistry, HandlerCodesPassThroughAndForeignCodesDoNot) {
    registry reg;
    reg.add("code", [](const json::value& args, std::stop_token) -> handler_result {
        return handler_error{std::string(args.as_string()), "why"};
    });
    for (const char* code : {"handler_error", "bad_args", "timeout", "cancelled"}) {
        const auto r = run_handler(reg, "code", json::string(code), {});
        ASSERT_TRUE(r.has_error());
        EXPECT_EQ(r.error(), (handler_error{code, "why"}));
    }
    for (const char* code : {"lost", "unknown_type", ""}) {
        const auto r = run_handler(reg, "code", json::string(code), {});
        ASSERT_TRUE(r.has_error());
        EXPECT_EQ(r.error().code, "handler_error") << code;
        EXPECT_NE(r.error().message.find("why"), std::string::npos);
    }
}

TEST(RolesRegistry, AfterAStopRequestErrorsBecomeCancelledButValuesStay) {
    registry reg;
    reg.add("value", ok_handler);
    reg.add("fails", [](const json::value&, std::stop_token) -> handler_result {
        return handler_error{"handler_error", "gave up"};
    });
    reg.add("throws", [](const json::value&, std::stop_token) -> handler_result {
        throw std::runtime_error("interrupted");
    });
    reg.add("cancels", [](const json::value&, std::stop_token stop) -> handler_result {
        if (stop.stop_requested())
            return handler_error{"cancelled", "saw the stop"};
        return json::value("ran");
    });
    std::stop_source source;
    source.request_stop();

    const auto v = run_handler(reg, "value", json::value(7), source.get_token());
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, json::value(7));

    for (const char* type : {"fails", "throws"}) {
        const auto r = run_handler(reg, type, nullptr, source.get_token());
        ASSERT_TRUE(r.has_error()) << type;
        EXPECT_EQ(r.error().code, "cancelled") << type;
    }
    const auto c = run_handler(reg, "cancels", nullptr, source.get_token());
    ASSERT_TRUE(c.has_error());
    EXPECT_EQ(c.error(), (handler_error{"cancelled", "saw the stop"}));

    // Without a stop request, the handler's own error stands.
    const auto f = run_handler(reg, "fails", nullptr, {});
    ASSERT_TRUE(f.has_error());
    EXPECT_EQ(f.error(), (handler_error{"handler_error", "gave up"}));
}

TEST(RolesRegistry, ValueOnAnErrorThrowsHandlerException) {
    const handler_result r = handler_error{"bad_args", "no"};
    try {
        (void)r.value();
        FAIL() << "value() did not throw";
    } catch (const handler_exception& e) {
        EXPECT_EQ(e.error(), (handler_error{"bad_args", "no"}));
        EXPECT_STREQ(e.what(), "bad_args: no");
    }
    const handler_result ok = json::value(3);
    EXPECT_EQ(ok.value(), json::value(3));
}

TEST(RolesRegistry, AsInt64AcceptsOnlyIntegralNumbers) {
    using zkd::protocol::as_int64;
    EXPECT_EQ(as_int64(json::value(5)), 5);
    EXPECT_EQ(as_int64(json::value(-5)), -5);
    EXPECT_EQ(as_int64(json::parse("5.0")), 5);
    EXPECT_EQ(as_int64(json::parse("5e3")), 5000);
    EXPECT_EQ(as_int64(json::parse("9223372036854775807")), INT64_MAX);
    EXPECT_EQ(as_int64(json::parse("-9223372036854775808")), INT64_MIN);
    EXPECT_EQ(as_int64(json::parse("9007199254740992.0")), 9007199254740992);
    EXPECT_FALSE(as_int64(json::parse("9223372036854775808")));
    EXPECT_FALSE(as_int64(json::parse("18446744073709551615")));
    EXPECT_FALSE(as_int64(json::parse("1.5")));
    EXPECT_FALSE(as_int64(json::parse("1e300")));
    EXPECT_FALSE(as_int64(json::parse("18014398509481984.0")));  // 2^54: past exact doubles
    EXPECT_FALSE(as_int64(json::parse(R"("5")")));
    EXPECT_FALSE(as_int64(json::parse("true")));
    EXPECT_FALSE(as_int64(json::parse("null")));
    EXPECT_FALSE(as_int64(json::parse("[5]")));
}

}  // namespace

namespace {

TEST(RolesRegistryHealth, TypesMarkedUnhealthyAreListedSortedAndEachChangeIsTold) {
    registry reg;
    auto health = reg.health();
    int told = 0;
    health->on_change([&told] { ++told; });
    EXPECT_TRUE(health->unhealthy().empty());
    health->set("zeta", true);
    health->set("alpha", true);
    health->set("alpha", true);  // no change: nobody told
    EXPECT_EQ(health->unhealthy(), (std::vector<std::string>{"alpha", "zeta"}));
    EXPECT_EQ(told, 2);
    health->set("zeta", false);
    health->set("never", false);  // no change
    EXPECT_EQ(health->unhealthy(), (std::vector<std::string>{"alpha"}));
    EXPECT_EQ(told, 3);
    health->on_change({});
    health->set("alpha", false);
    EXPECT_EQ(told, 3);
    EXPECT_EQ(reg.health(), health) << "one state per registry";
}

}  // namespace

}  // namespace ZKD_UNITY_ID
