// SPDX-License-Identifier: MIT
// Served exec types without processes: the frames (docs/exec.md "Serve mode") and the pool's
// decisions.
#include "handlers/serve.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

namespace json = boost::json;
using namespace zkd::handlers::exec::serve;
using namespace std::chrono_literals;

namespace {

TEST(ExecServeFrames, ATaskFrameIsOneLineOfJsonWithEveryMember) {
    task_frame t;
    t.id = "t5-1763733600123-0a1b2c3d4e5f60";
    t.attempt = 2;
    t.epoch = 7;
    t.type = "resize";
    t.args = json::parse(R"({"text":"a\nb"})");
    t.deadline_ms = 1763733601123;
    const auto line = encode(t);
    ASSERT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "a newline inside a string is escaped";
    EXPECT_EQ(
        json::parse(line), json::parse(
                               R"({"op":"task","id":"t5-1763733600123-0a1b2c3d4e5f60","attempt":2,
                                   "epoch":7,"type":"resize","args":{"text":"a\nb"},
                                   "deadline_ms":1763733601123})"
                           )
    );
    EXPECT_EQ(json::parse(encode_cancel("x")), json::parse(R"({"op":"cancel","id":"x"})"));
}

template <class T>
T frame_of(std::string_view line) {
    auto parsed = parse_frame(line);
    if (auto* why = std::get_if<std::string>(&parsed)) {
        ADD_FAILURE() << line << ": " << *why;
        return T{};
    }
    auto* f = std::get_if<T>(&std::get<frame>(parsed));
    if (f == nullptr) {
        ADD_FAILURE() << line << ": another kind of frame";
        return T{};
    }
    return *f;
}

std::string refusal(std::string_view line) {
    auto parsed = parse_frame(line);
    auto* why = std::get_if<std::string>(&parsed);
    return why != nullptr ? *why : std::string();
}

TEST(ExecServeFrames, ParsesWhatAProgramWrites) {
    EXPECT_EQ(frame_of<ready_frame>(R"({"op":"ready","protocol":1})").protocol, 1);
    const auto p = frame_of<progress_frame>(
        R"({"op":"progress","id":"a","fraction":1.5,"message":"more","extra":[1]})"
    );
    EXPECT_EQ(p.id, "a");
    EXPECT_DOUBLE_EQ(p.fraction, 1.0);  // clamped
    EXPECT_EQ(p.message, "more");
    EXPECT_EQ(frame_of<progress_frame>(R"({"op":"progress","id":"a","fraction":-2})").fraction, 0);
    const auto l = frame_of<log_frame>(R"({"op":"log","level":"loud","message":"hi"})");
    EXPECT_EQ(l.level, "info");
    EXPECT_EQ(l.message, "hi");
    EXPECT_EQ(frame_of<log_frame>(R"({"op":"log","level":"warn"})").level, "warn");
    const auto r = frame_of<result_frame>(R"({"op":"result","id":"a","value":{"n":[1,2]}})");
    EXPECT_EQ(r.value, json::parse(R"({"n":[1,2]})"));
    EXPECT_EQ(frame_of<result_frame>(R"({"op":"result","id":"a","value":null})").value, nullptr);
    const auto e = frame_of<error_frame>(R"({"op":"error","id":"a","message":"no"})");
    EXPECT_EQ(e.code, "handler_error");
    EXPECT_EQ(e.message, "no");
    EXPECT_EQ(
        frame_of<error_frame>(R"({"op":"error","id":"a","message":"m","code":"bad_args"})").code,
        "bad_args"
    );
    EXPECT_EQ(frame_of<unknown_frame>(R"({"op":"heartbeat"})").op, "heartbeat");
}

TEST(ExecServeFrames, RefusesWhatIsNoFrame) {
    EXPECT_NE(refusal("not json").find("not JSON"), std::string::npos);
    EXPECT_NE(refusal("[1,2]").find("not a JSON object"), std::string::npos);
    EXPECT_EQ(refusal(R"({"id":"a"})"), "no \"op\" string");
    EXPECT_EQ(refusal(R"({"op":5})"), "no \"op\" string");
    EXPECT_NE(refusal(R"({"op":"result","value":1})").find("\"id\""), std::string::npos);
    EXPECT_NE(refusal(R"({"op":"result","id":7,"value":1})").find("\"id\""), std::string::npos);
    EXPECT_NE(refusal(R"({"op":"result","id":"a"})").find("\"value\""), std::string::npos);
    EXPECT_NE(refusal(R"({"op":"progress","id":"a"})").find("fraction"), std::string::npos);
    EXPECT_NE(
        refusal(R"({"op":"error","id":"a","code":"Not A Code"})").find("code word"),
        std::string::npos
    );
    EXPECT_NE(
        refusal(R"({"op":"error","id":"a","code":")" + std::string(65, 'a') + "\"}").find("code"),
        std::string::npos
    );
}

TEST(ExecServeFrames, TheLineSplitterCutsLinesAndRefusesOneTooLong) {
    line_splitter s(8);
    std::vector<std::string> lines;
    EXPECT_TRUE(s.feed("ab", lines));
    EXPECT_TRUE(lines.empty());
    EXPECT_TRUE(s.feed("c\nde\n\nf", lines));
    EXPECT_EQ(lines, (std::vector<std::string>{"abc", "de", ""}));
    lines.clear();
    EXPECT_TRUE(s.feed("1234567\n", lines));  // "f1234567": 8 bytes, fits
    EXPECT_EQ(lines, (std::vector<std::string>{"f1234567"}));
    lines.clear();
    EXPECT_FALSE(s.feed("123456789", lines));
}

pool_settings settings(int concurrency, int warm = 0) {
    pool_settings s;
    s.concurrency = concurrency;
    s.warm = warm;
    s.crash_loop = 3;
    return s;
}

TEST(ExecServePool, StartsTheWarmOnesAtOnceAndTheRestOnDemandWithinConcurrency) {
    pool_fsm p(settings(3, 1));
    EXPECT_EQ(p.to_start(), 1);
    p.started(1);
    EXPECT_EQ(p.to_start(), 0);
    p.ready(1);
    p.task_waiting();
    p.task_waiting();
    // One idle process for two tasks: one more start.
    EXPECT_EQ(p.to_start(), 1);
    EXPECT_EQ(p.assign(), 1);
    EXPECT_EQ(p.assign(), std::nullopt);
    p.started(2);
    EXPECT_EQ(p.to_start(), 0);  // the second task waits for 2
    p.task_waiting();
    p.task_waiting();
    EXPECT_EQ(p.to_start(), 1);  // within concurrency 3: one more, not two
    p.started(3);
    EXPECT_EQ(p.to_start(), 0);
    EXPECT_EQ(p.live(), 3);
}

TEST(ExecServePool, TheLongestLivedIdleProcessGetsTheNextTask) {
    pool_fsm p(settings(3, 3));
    for (int i = 1; i <= 3; ++i) {
        p.started(i);
    }
    p.ready(3);
    p.ready(2);
    p.task_waiting();
    EXPECT_EQ(p.assign(), 2);  // 1 is not ready; of 2 and 3, the first started
    EXPECT_FALSE(p.task_done(2, 0));
    p.task_waiting();
    EXPECT_EQ(p.assign(), 2);
}

TEST(ExecServePool, RecyclesAfterMaxTasksOrOverMaxMemoryBetweenTasks) {
    pool_settings s = settings(1);
    s.max_tasks = 2;
    s.max_memory = 1000;
    pool_fsm p(s);
    p.started(1);
    p.ready(1);
    p.task_waiting();
    ASSERT_EQ(p.assign(), 1);
    EXPECT_FALSE(p.task_done(1, 999));
    p.task_waiting();
    ASSERT_EQ(p.assign(), 1);
    EXPECT_TRUE(p.task_done(1, 0));  // its second task
    EXPECT_EQ(p.state_of(1), pool_fsm::state::retiring);
    EXPECT_EQ(p.live(), 0);
    p.task_waiting();
    EXPECT_EQ(p.to_start(), 1) << "a retiring process does not count against concurrency";
    p.started(2);
    p.ready(2);
    ASSERT_EQ(p.assign(), 2);
    EXPECT_TRUE(p.task_done(2, 1001)) << "over max-memory";
    p.exited(1, true);
    EXPECT_FALSE(p.backing_off()) << "an expected exit is no failure";
}

TEST(ExecServePool, FailuresBackOffExponentiallyAndACrashLoopIsUnhealthyUntilAStartSucceeds) {
    pool_fsm p(settings(2, 2));
    EXPECT_EQ(p.backoff(), 0ms);
    EXPECT_EQ(p.to_start(), 2);
    p.started(1);
    p.started(2);
    p.start_failed(1);
    EXPECT_TRUE(p.backing_off());
    EXPECT_EQ(p.backoff(), 100ms);
    EXPECT_EQ(p.to_start(), 0);
    p.backoff_over();
    EXPECT_EQ(p.to_start(), 0) << "after a failure, one start at a time (2 is starting)";
    p.start_failed(2);
    EXPECT_EQ(p.backoff(), 200ms);
    p.backoff_over();
    EXPECT_EQ(p.to_start(), 1);
    p.started(3);
    p.start_failed(3);
    EXPECT_TRUE(p.unhealthy());
    EXPECT_EQ(p.failed_starts(), 3);
    EXPECT_EQ(p.backoff(), 400ms);
    p.backoff_over();
    p.task_waiting();
    EXPECT_EQ(p.to_start(), 1) << "unhealthy: one probe at a time, not one per task";
    p.started(4);
    EXPECT_EQ(p.to_start(), 0);
    p.ready(4);
    EXPECT_FALSE(p.unhealthy());
    EXPECT_EQ(p.failed_starts(), 0);
    EXPECT_EQ(p.assign(), 4);
    EXPECT_FALSE(p.task_done(4, 0));
    EXPECT_EQ(p.backoff(), 0ms) << "a task done resets the backoff";
    EXPECT_EQ(p.to_start(), 1) << "warm again";
}

TEST(ExecServePool, ACrashCountsForTheBackoffNotForTheCrashLoop) {
    pool_fsm p(settings(1));
    p.started(1);
    p.ready(1);
    p.task_waiting();
    ASSERT_EQ(p.assign(), 1);
    p.exited(1, false);
    EXPECT_TRUE(p.backing_off());
    EXPECT_EQ(p.backoff(), 100ms);
    EXPECT_FALSE(p.unhealthy());
    EXPECT_EQ(p.failed_starts(), 0);
    EXPECT_EQ(p.live(), 0);
}

TEST(ExecServePool, TheBackoffIsCapped) {
    pool_settings s = settings(1);
    s.crash_loop = 1000;
    pool_fsm p(s);
    for (int i = 1; i <= 20; ++i) {
        p.started(i);
        p.start_failed(i);
    }
    EXPECT_EQ(p.backoff(), s.backoff_max);
}

TEST(ExecServePool, AWaitingTaskThatGivesUpNeedsNoProcess) {
    pool_fsm p(settings(2));
    p.task_waiting();
    EXPECT_EQ(p.to_start(), 1);
    p.task_gave_up();
    EXPECT_EQ(p.to_start(), 0);
    EXPECT_EQ(p.assign(), std::nullopt);
}

}  // namespace

TEST(ExecServePool, ATaskWhoseFrameTheDeadProcessNeverReadGoesToAnother) {
    // A frame at byte 100 of 150 sent: all 50 still in the pipe, or more (other frames).
    EXPECT_TRUE(frame_unread(100, 150, 50));
    EXPECT_TRUE(frame_unread(100, 150, 80));
    // The write of the frame failed before any byte reached the pipe.
    EXPECT_TRUE(frame_unread(100, 100, 0));
    EXPECT_TRUE(frame_unread(0, 0, 0));
    // One byte of it read: the program saw its task.
    EXPECT_FALSE(frame_unread(100, 150, 49));
    EXPECT_FALSE(frame_unread(100, 150, 0));
    // More unread than sent (cannot be; counted as nothing read).
    EXPECT_TRUE(frame_unread(100, 150, 400));
}
