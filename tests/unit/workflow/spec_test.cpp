// SPDX-License-Identifier: MIT
// A workflow's spec: parsing, every refusal and its message, the canonical text
// (docs/workflows.md, docs/protocol.md §11).
#include "workflow/spec.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::workflow;

namespace {

std::string error_of(std::string_view text) {
    auto s = parse_spec(text);
    EXPECT_FALSE(s.has_value()) << text;
    return s ? std::string{} : s.error().message;
}

TEST(WorkflowSpec, ParsesAChainWithOptions) {
    auto s = parse_spec(R"({"name":"demo","steps":{
        "b":{"type":"sum","args":{"values":[1]},"after":["a"],"priority":7,"timeout_ms":500,
             "max_attempts":2,"continue_on_failure":true},
        "a":{"type":"echo","args":3}}})");
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->name, "demo");
    ASSERT_EQ(s->steps.size(), 2U);
    EXPECT_EQ(s->steps[0].name, "a");  // sorted by name
    EXPECT_EQ(s->steps[1].name, "b");
    EXPECT_EQ(s->steps[1].after, std::vector<std::size_t>{0});
    EXPECT_EQ(s->steps[1].priority, 7);
    EXPECT_EQ(s->steps[1].timeout.count(), 500);
    EXPECT_EQ(s->steps[1].max_attempts, 2);
    EXPECT_TRUE(s->steps[1].continue_on_failure);
    EXPECT_EQ(s->dependants[0], std::vector<std::size_t>{1});
    EXPECT_EQ(s->sinks(), std::vector<std::size_t>{1});
    EXPECT_EQ(s->index_of("b"), 1U);
    EXPECT_FALSE(s->index_of("c"));
}

TEST(WorkflowSpec, MapAddsItsSourceToAfterAndDedupes) {
    auto s = parse_spec(R"({"steps":{"src":{"type":"echo","args":[1,2]},
        "m":{"type":"echo","map":"src","after":["src","src"]}}})");
    ASSERT_TRUE(s) << s.error().message;
    const auto m = *s->index_of("m");
    const auto src = *s->index_of("src");
    EXPECT_EQ(s->steps[m].map, src);
    EXPECT_EQ(s->steps[m].after, std::vector<std::size_t>{src});
}

TEST(WorkflowSpec, CanonicalTextRoundTrips) {
    auto s = parse_spec(R"({"steps":{"z":{"type":"echo","after":["a"],"args":{"k":[1,2.5]}},
        "a":{"type":"echo"},"m":{"type":"sum","map":"a","after":["z"],"priority":5,
        "max_attempts":3,"timeout_ms":0}}})");
    ASSERT_TRUE(s) << s.error().message;
    const auto text = encode_spec(*s);
    EXPECT_EQ(
        text, R"({"steps":{"a":{"type":"echo"},"m":{"type":"sum","after":["z"],"map":"a"},)"
              R"("z":{"type":"echo","args":{"k":[1,2.5]},"after":["a"]}}})"
    );
    auto again = parse_spec(text);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *s);
}

TEST(WorkflowSpec, RefusesWhatIsNotASpec) {
    EXPECT_NE(error_of("{").find("the spec is not JSON"), std::string::npos);
    EXPECT_NE(error_of("[]").find("a spec is a JSON object"), std::string::npos);
    EXPECT_EQ(error_of("{}"), "\"steps\" must be an object of at least one step");
    EXPECT_EQ(error_of(R"({"steps":{}})"), "\"steps\" must be an object of at least one step");
    EXPECT_EQ(
        error_of(R"({"step":{}})"),
        "unknown field \"step\" at the top of the spec (did you mean \"steps\"?)"
    );
    EXPECT_EQ(
        error_of(R"({"name":7,"steps":{"a":{"type":"echo"}}})"),
        "\"name\" must be a string of at most 128 bytes"
    );
}

TEST(WorkflowSpec, RefusesBadSteps) {
    EXPECT_EQ(
        error_of(R"({"steps":{"a b":{"type":"echo"}}})"),
        "step \"a b\": a step name is 1 to 64 characters of [A-Za-z0-9_.-]"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":3}})"), "step \"a\": a step is an object with at least \"type\""
    );
    EXPECT_EQ(error_of(R"({"steps":{"a":{"args":1}}})"), "step \"a\": \"type\" is required");
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"no spaces"}}})"),
        "step \"a\": \"type\" must be 1 to 128 characters of [A-Za-z0-9_.:-]"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","afterr":[]}}})"),
        "step \"a\": unknown field \"afterr\" (did you mean \"after\"?)"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","after":"b"}}})"),
        "step \"a\": \"after\" must be an array of step names"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","priority":10}}})"),
        "step \"a\": \"priority\" must be an integer from 0 to 9"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","timeout_ms":-1}}})"),
        "step \"a\": \"timeout_ms\" must be a whole number of milliseconds, 0 or more"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","max_attempts":0}}})"),
        "step \"a\": \"max_attempts\" must be an integer from 1 to 1000"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","continue_on_failure":1}}})"),
        "step \"a\": \"continue_on_failure\" must be true or false"
    );
}

TEST(WorkflowSpec, RefusesUnknownNamesWithTheNearest) {
    EXPECT_EQ(
        error_of(R"({"steps":{"fetch":{"type":"echo"},"b":{"type":"echo","after":["fetsh"]}}})"),
        "step \"b\": \"after\" names \"fetsh\", which is no step of the workflow (did you mean "
        "\"fetch\"?)"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"b":{"type":"echo","map":"zzzzzz"}}})"),
        "step \"b\": \"map\" names \"zzzzzz\", which is no step of the workflow"
    );
}

TEST(WorkflowSpec, RefusesMapRules) {
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","map":"a"}}})"),
        "step \"a\": a step cannot map over its own result"
    );
    EXPECT_NE(
        error_of(R"({"steps":{"a":{"type":"echo"},"b":{"type":"echo","map":"a","args":[1]}}})")
            .find("step \"b\": the \"args\" of a map step must be an object"),
        std::string::npos
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","map":3}}})"),
        "step \"a\": \"map\" must be the name of a step"
    );
}

TEST(WorkflowSpec, RefusesCyclesNamingThem) {
    EXPECT_EQ(
        error_of(R"({"steps":{"a":{"type":"echo","after":["a"]}}})"),
        "step \"a\": a step cannot wait for itself"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"root":{"type":"echo"},
            "a":{"type":"echo","after":["c","root"]},"b":{"type":"echo","after":["a"]},
            "c":{"type":"echo","after":["b"]},"d":{"type":"echo","after":["c"]}}})"),
        "the steps form a cycle: a -> b -> c -> a (each waits for the one before it)"
    );
    EXPECT_EQ(
        error_of(R"({"steps":{"x":{"type":"echo","after":["y"]},"y":{"type":"echo","map":"x"}}})"),
        "the steps form a cycle: x -> y -> x (each waits for the one before it)"
    );
}

TEST(WorkflowSpec, RefusesArgsNestedTooDeep) {
    auto nested = [](int levels) {
        return R"({"steps":{"a":{"type":"echo","args":)" + std::string(levels, '[') +
               std::string(levels, ']') + "}}}";
    };
    EXPECT_TRUE(parse_spec(nested(63)));  // as deep as a task's args may be
    EXPECT_EQ(
        error_of(nested(64)), "the spec nests too deeply: a step's args may nest at most 63 levels"
    );
}

TEST(WorkflowSpec, SizeLimits) {
    std::string big(max_spec_bytes + 1, ' ');
    EXPECT_EQ(error_of(big), "the spec is 16777217 bytes, over the limit of 16777216 bytes");

    auto many = [](std::size_t n) {
        std::string t = R"({"steps":{)";
        for (std::size_t i = 0; i < n; ++i) {
            t += (i ? "," : "") + std::string(R"("s)") + std::to_string(i) + R"(":{"type":"echo")" +
                 (i ? R"(,"after":["s)" + std::to_string(i - 1) + R"("])" : std::string{}) + "}";
        }
        return t + "}}";
    };
    auto ok = parse_spec(many(10'000));  // a chain of 10,000 steps fits
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->steps.size(), 10'000U);
    EXPECT_EQ(error_of(many(max_steps + 1)), "the spec has 50001 steps, over the limit of 50000");
}

TEST(WorkflowSpec, StepNames) {
    EXPECT_TRUE(is_valid_step_name("a.b-c_9"));
    EXPECT_FALSE(is_valid_step_name(""));
    EXPECT_FALSE(is_valid_step_name(std::string(65, 'a')));
    EXPECT_TRUE(is_valid_step_name(std::string(64, 'a')));
    EXPECT_FALSE(is_valid_step_name("a/b"));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
