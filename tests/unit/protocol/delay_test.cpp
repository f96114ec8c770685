// SPDX-License-Identifier: MIT
// Delayed tasks' times and retries' backoff (docs/protocol.md §4.3).
#include "protocol/delay.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;

namespace {

TEST(ProtocolDelay, ParsesRfc3339InUtc) {
    EXPECT_EQ(parse_time("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parse_time("2026-11-27T08:30:00Z"), 1795768200000);
    EXPECT_EQ(parse_time("2026-11-27t08:30:00z"), 1795768200000);
    EXPECT_EQ(parse_time("2026-11-27 08:30:00Z"), 1795768200000);
    EXPECT_EQ(parse_time("2026-11-27T08:30:00.25Z"), 1795768200250);
    EXPECT_EQ(parse_time("2026-11-27T08:30:00.123456Z"), 1795768200123);  // truncated
    EXPECT_EQ(parse_time("2024-02-29T00:00:00Z"), 1709164800000);         // a leap day
}

TEST(ProtocolDelay, ParsesRfc3339Offsets) {
    EXPECT_EQ(parse_time("2026-11-27T09:30:00+01:00"), 1795768200000);
    EXPECT_EQ(parse_time("2026-11-27T03:00:00-05:30"), 1795768200000);
    EXPECT_EQ(parse_time("2026-11-27T08:30:00+00:00"), 1795768200000);
}

TEST(ProtocolDelay, ParsesEpochMilliseconds) {
    EXPECT_EQ(parse_time("1795768200000"), 1795768200000);
    EXPECT_EQ(parse_time("0"), 0);
    EXPECT_EQ(parse_time("9999999999999"), max_due_ms);
}

TEST(ProtocolDelay, RefusesWhatIsNoTime) {
    for (const auto* bad :
         {"", "now", "2026-11-27", "2026-11-27T08:30:00", "2026-13-01T00:00:00Z",
          "2026-02-29T00:00:00Z", "2026-11-31T00:00:00Z", "2026-11-27T24:00:00Z",
          "2026-11-27T08:60:00Z", "2026-11-27T08:30:00.Z", "2026-11-27T08:30:00+1:00",
          "2026-11-27T08:30:00Zjunk", "1969-12-31T23:59:59Z", "10000000000000", "-5", "12.5",
          "2026-11-27T08:30:00+24:00"}) {
        EXPECT_FALSE(parse_time(bad).has_value()) << bad;
    }
}

TEST(ProtocolDelay, FormatsTimeAsRfc3339AndBack) {
    EXPECT_EQ(format_time(0), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(format_time(1795768200250), "2026-11-27T08:30:00.250Z");
    for (const std::int64_t t :
         {std::int64_t{1}, std::int64_t{951782400000}, std::int64_t{1709164800999}, max_due_ms}) {
        EXPECT_EQ(parse_time(format_time(t)), t) << t;
    }
}

TEST(ProtocolDelay, ParsesBackoff) {
    EXPECT_EQ(parse_backoff("1s"), (backoff_policy{0, 1s, 60s}));
    EXPECT_EQ(parse_backoff("500ms:10s"), (backoff_policy{0, 500ms, 10s}));
    EXPECT_EQ(parse_backoff("2h"), (backoff_policy{0, 2h, 24h}));  // 60 x base, capped
    EXPECT_FALSE(parse_backoff("0").has_value());
    EXPECT_FALSE(parse_backoff("10s:1s").has_value());  // max below base
    EXPECT_FALSE(parse_backoff("1s:").has_value());
    EXPECT_FALSE(parse_backoff("x").has_value());
    EXPECT_FALSE(parse_backoff("25h").has_value());
}

TEST(ProtocolDelay, BackoffCapDoublesUpToTheMax) {
    const backoff_policy p{5, 100ms, 1s};
    EXPECT_EQ(backoff_cap(p, 1), 100ms);
    EXPECT_EQ(backoff_cap(p, 2), 200ms);
    EXPECT_EQ(backoff_cap(p, 3), 400ms);
    EXPECT_EQ(backoff_cap(p, 4), 800ms);
    EXPECT_EQ(backoff_cap(p, 5), 1s);
    EXPECT_EQ(backoff_cap(p, 1000), 1s);  // no overflow however many
    const backoff_policy huge{5, 24h, 24h};
    EXPECT_EQ(backoff_cap(huge, 100), 24h);
}

TEST(ProtocolDelay, FullJitterSpansZeroToTheCap) {
    const backoff_policy p{3, 100ms, 10s};
    EXPECT_EQ(backoff_delay(p, 1, 0), 0ms);
    EXPECT_EQ(backoff_delay(p, 1, 100), 100ms);  // the cap itself is reachable
    EXPECT_EQ(backoff_delay(p, 1, 101), 0ms);
    std::mt19937_64 rng(42);
    std::set<std::int64_t> seen;
    for (int i = 0; i < 2000; ++i) {
        const auto d = backoff_delay(p, 3, rng());
        ASSERT_GE(d, 0ms);
        ASSERT_LE(d, 400ms);
        seen.insert(d.count());
    }
    EXPECT_GT(seen.size(), 300U);  // spread, not a handful of values
}

TEST(ProtocolDelay, RetriesFailuresAndTimeoutsOnly) {
    EXPECT_TRUE(retryable(task_state::failed, codes::handler_error));
    EXPECT_TRUE(retryable(task_state::failed, codes::output_too_large));
    EXPECT_TRUE(retryable(task_state::failed, "some_newer_code"));
    EXPECT_TRUE(retryable(task_state::timed_out, codes::timeout));
    EXPECT_FALSE(retryable(task_state::failed, codes::malformed_task));
    EXPECT_FALSE(retryable(task_state::failed, codes::unknown_type));
    EXPECT_FALSE(retryable(task_state::failed, codes::bad_args));
    EXPECT_FALSE(retryable(task_state::cancelled, codes::cancelled));
    EXPECT_FALSE(retryable(task_state::lost, codes::attempts_exhausted));
    EXPECT_FALSE(retryable(task_state::succeeded, ""));
}

TEST(ProtocolDelay, CutsUtf8AtABoundary) {
    EXPECT_EQ(cut_utf8("abc", 5), "abc");
    EXPECT_EQ(cut_utf8("abcdef", 3), "abc");
    EXPECT_EQ(cut_utf8("a\xc3\xa9z", 2), "a");  // é is two bytes: not split
    EXPECT_EQ(cut_utf8("a\xc3\xa9z", 3), "a\xc3\xa9");
}

}  // namespace

namespace {

using zkd::protocol::backoff_policy;
using zkd::protocol::plan_retry;
using zkd::protocol::read_delay_fields;
using zkd::protocol::task_error;
using zkd::protocol::task_state;

const backoff_policy no_retries{0, 1000ms, 60'000ms};

TEST(ProtocolDelayFields, ReadsWhatATaskSays) {
    const auto f = read_delay_fields(
        R"({"v":1,"type":"echo","due_ms":5000,"retries":3,"backoff_ms":100,"backoff_max_ms":900,)"
        R"("try":2,"errors":[{"try":1,"code":"handler_error","message":"x","finished_ms":1}]})"
    );
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->due_ms, 5000);
    EXPECT_EQ(f->retries, 3);
    EXPECT_EQ(f->backoff, (backoff_policy{0, 100ms, 900ms}));
    EXPECT_EQ(f->try_number, 2);
    EXPECT_EQ(f->errors.size(), 1U);
}

TEST(ProtocolDelayFields, FieldsOfAnotherShapeAreAbsent) {
    const auto f = read_delay_fields(
        R"({"v":1,"type":"echo","due_ms":"soon","retries":1000,"backoff_ms":0,"try":0,"errors":{}})"
    );
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(*f, zkd::protocol::delay_fields{});
    EXPECT_FALSE(read_delay_fields("not json").has_value());
    EXPECT_FALSE(zkd::protocol::read_due_ms("[1]").has_value());
    EXPECT_EQ(zkd::protocol::read_due_ms(R"({"due_ms":12})"), 12);
}

TEST(ProtocolRetry, AFailedTryWithRetriesLeftWaitsAsADelayedTask) {
    const std::string assigned =
        R"({"v":1,"type":"sh","args":null,"retries":2,"backoff_ms":100,"backoff_max_ms":1000,)"
        R"("attempt":2,"epoch":7,"assigned_ms":10,"worker":"w-1-aa","running_ms":11,)"
        R"("progress":{"fraction":5E-1,"message":"","at_ms":12}})";
    const task_error boom{"handler_error", "boom"};
    const auto plan = plan_retry(assigned, task_state::failed, boom, 50'000, no_retries, 77);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->next_try, 2);
    EXPECT_EQ(plan->due_ms, 50'000 + 77 % 101);  // retry 1: jitter over [0, 100]
    const auto f = read_delay_fields(plan->data);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->try_number, 2);
    EXPECT_EQ(f->due_ms, plan->due_ms);
    ASSERT_EQ(f->errors.size(), 1U);
    EXPECT_EQ(f->errors[0].at("code"), "handler_error");
    EXPECT_EQ(f->errors[0].at("try"), 1);
    // The assignment is gone, the attempt starts again, the rest is the task as submitted.
    for (const auto* gone :
         {"\"epoch\"", "\"worker\"", "\"assigned_ms\"", "\"running_ms\"", "\"progress\""}) {
        EXPECT_EQ(plan->data.find(gone), std::string::npos) << gone;
    }
    EXPECT_NE(plan->data.find("\"attempt\":1"), std::string::npos);
    const auto node = zkd::protocol::decode_task_node(plan->data);
    ASSERT_TRUE(node.has_value()) << node.error().message;
    EXPECT_EQ(node->task.type, "sh");
    EXPECT_EQ(node->assigned, zkd::protocol::assignment{});
    EXPECT_EQ(node->run, zkd::protocol::progress{});

    // The second failure: retry 2, a wider window, two errors.
    const auto second =
        plan_retry(plan->data, task_state::timed_out, {"timeout", "slow"}, 60'000, no_retries, 150);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->next_try, 3);
    EXPECT_EQ(second->due_ms, 60'000 + 150);  // retry 2: [0, 200]
    EXPECT_EQ(read_delay_fields(second->data)->errors.size(), 2U);
    // The third try was the last.
    EXPECT_FALSE(plan_retry(second->data, task_state::failed, boom, 70'000, no_retries, 1));
}

TEST(ProtocolRetry, NoRetryForWhatCannotBeMended) {
    const std::string assigned = R"({"v":1,"type":"sh","retries":5})";
    for (const auto& [state, code] : std::vector<std::pair<task_state, std::string>>{
             {task_state::failed, "bad_args"},
             {task_state::failed, "unknown_type"},
             {task_state::failed, "malformed_task"},
             {task_state::cancelled, "cancelled"},
             {task_state::succeeded, ""}}) {
        EXPECT_FALSE(plan_retry(assigned, state, {code, ""}, 1, no_retries, 1)) << code;
    }
}

TEST(ProtocolRetry, TheWorkersDefaultAppliesToTasksThatSayNothing) {
    const std::string silent = R"({"v":1,"type":"sh"})";
    const task_error boom{"handler_error", "boom"};
    EXPECT_FALSE(plan_retry(silent, task_state::failed, boom, 1, no_retries, 1));
    const backoff_policy two{2, 10ms, 10ms};
    const auto plan = plan_retry(silent, task_state::failed, boom, 1000, two, 3);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->due_ms, 1003);
    // A task's own "retries":0 wins over the default.
    EXPECT_FALSE(
        plan_retry(R"({"v":1,"type":"sh","retries":0})", task_state::failed, boom, 1, two, 1)
    );
}

TEST(ProtocolRetry, LongMessagesAreCutAndTheNodeStaysWithinItsLimit) {
    const task_error big{"handler_error", std::string(5000, 'x')};
    const auto plan =
        plan_retry(R"({"v":1,"type":"sh","retries":1})", task_state::failed, big, 1, no_retries, 0);
    ASSERT_TRUE(plan.has_value());
    const auto f = read_delay_fields(plan->data);
    EXPECT_EQ(f->errors[0].at("message").as_string().size(), 1024U);
}

TEST(ProtocolRetry, RewritesOfATaskKeepItsRetryFields) {
    // The master's assignment (T2) and requeue (T6) and the worker's running mark and
    // progress (T3) stamp the task's bytes; a reader may also decode and encode the node:
    // the fields of §4.3 must survive all of them.
    const std::string submitted =
        R"({"v":1,"type":"sh","retries":2,"backoff_ms":100,"backoff_max_ms":900,"try":2,)"
        R"("errors":[{"try":1,"code":"handler_error","message":"x","finished_ms":1}],)"
        R"("due_ms":5})";
    const auto fields = read_delay_fields(submitted);
    ASSERT_TRUE(fields.has_value());

    auto node = zkd::protocol::decode_task_node(submitted);
    ASSERT_TRUE(node.has_value()) << node.error().message;
    EXPECT_EQ(node->task.timing.size(), 6U);
    node->assigned = zkd::protocol::assignment{1, 7, 9, "w"};
    const auto reencoded = zkd::protocol::encode(*node);
    EXPECT_EQ(read_delay_fields(reencoded), fields) << reencoded;
    EXPECT_EQ(read_delay_fields(zkd::protocol::encode(node->task)), fields);

    const auto assigned = zkd::protocol::stamp(submitted, zkd::protocol::assignment{1, 7, 9, "w"});
    ASSERT_TRUE(assigned.has_value());
    EXPECT_EQ(read_delay_fields(*assigned), fields) << *assigned;
    const auto running =
        zkd::protocol::stamp(*assigned, zkd::protocol::progress{10, 0.5, "half", 11});
    ASSERT_TRUE(running.has_value());
    EXPECT_EQ(read_delay_fields(*running), fields) << *running;
    const auto requeued = zkd::protocol::stamp(*running, zkd::protocol::assignment{2, 0, 0, {}});
    ASSERT_TRUE(requeued.has_value());
    EXPECT_EQ(read_delay_fields(*requeued), fields) << *requeued;
    const auto back = zkd::protocol::decode_task_node(*running);
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(back->task.timing, node->task.timing);
    EXPECT_EQ(back->assigned.worker, "w");
    EXPECT_EQ(back->run.running_ms, 10);

    // A retry of the stamped node (the worker's T4) is the task as submitted for its next
    // try, and a stamp of that keeps its try and errors.
    const auto retry =
        plan_retry(*running, task_state::failed, {"handler_error", "again"}, 100, no_retries, 0);
    ASSERT_TRUE(retry.has_value());
    EXPECT_EQ(retry->next_try, 3);
    const auto next = zkd::protocol::decode_task_node(retry->data);
    ASSERT_TRUE(next.has_value()) << next.error().message;
    EXPECT_EQ(next->assigned, zkd::protocol::assignment{});
    EXPECT_EQ(next->run, zkd::protocol::progress{});
    const auto next_assigned =
        zkd::protocol::stamp(retry->data, zkd::protocol::assignment{1, 8, 200, "w2"});
    ASSERT_TRUE(next_assigned.has_value());
    const auto next_fields = read_delay_fields(*next_assigned);
    ASSERT_TRUE(next_fields.has_value());
    EXPECT_EQ(next_fields->try_number, 3);
    EXPECT_EQ(next_fields->errors.size(), 2U);
    EXPECT_EQ(next_fields, read_delay_fields(retry->data));
}

TEST(ProtocolRetry, TheFinalResultCarriesTheEarlierErrors) {
    const std::string result = R"({"v":1,"task":"t","state":"succeeded","value":1})";
    EXPECT_EQ(zkd::protocol::with_earlier_tries(result, R"({"v":1,"type":"sh"})"), result);
    const auto out = zkd::protocol::with_earlier_tries(
        result, R"({"v":1,"type":"sh","try":3,"errors":[{"try":1},{"try":2}]})"
    );
    EXPECT_NE(out.find("\"try\":3"), std::string::npos);
    EXPECT_NE(out.find("\"errors\":[{\"try\":1},{\"try\":2}]"), std::string::npos);
    EXPECT_TRUE(zkd::protocol::decode_result(out).has_value());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
