// SPDX-License-Identifier: MIT
// Served exec types without processes: the frames (docs/exec.md "Serve mode") and the pool's
// decisions.
#include "handlers/serve.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

namespace ZKD_UNITY_ID {

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

std::vector<std::string> strings(const std::vector<std::string_view>& views) {
    return {views.begin(), views.end()};
}

TEST(ExecServeFrames, TheLineSplitterCutsLinesAndRefusesOneTooLong) {
    line_splitter s(8);
    std::vector<std::string_view> lines;
    EXPECT_TRUE(s.feed("ab", lines));
    EXPECT_TRUE(lines.empty());
    EXPECT_TRUE(s.feed("c\nde\n\nf", lines));
    EXPECT_EQ(strings(lines), (std::vector<std::string>{"abc", "de", ""}));
    lines.clear();
    EXPECT_TRUE(s.feed("1234567\n", lines));  // "f1234567": 8 bytes, fits
    EXPECT_EQ(strings(lines), (std::vector<std::string>{"f1234567"}));
    lines.clear();
    EXPECT_FALSE(s.feed("123456789", lines));
}

TEST(ExecServeFrames, TheLineSplitterHandsOutOneReadsLinesWithoutCopies) {
    line_splitter s(16);
    std::vector<std::string_view> lines;
    const std::string read = "one\ntwo\nthr";
    ASSERT_TRUE(s.feed(read, lines));
    ASSERT_EQ(strings(lines), (std::vector<std::string>{"one", "two"}));
    EXPECT_EQ(lines[0].data(), read.data()) << "a view into the read, not a copy";
    EXPECT_EQ(lines[1].data(), read.data() + 4);
    lines.clear();
    const std::string next = "ee\nfour\n";
    ASSERT_TRUE(s.feed(next, lines));
    EXPECT_EQ(strings(lines), (std::vector<std::string>{"three", "four"}))
        << "a line two reads wrote is joined";
    EXPECT_EQ(lines[1].data(), next.data() + 3);
    lines.clear();
    EXPECT_FALSE(s.feed("0123456789abcdefg\n", lines)) << "17 bytes in one read";
    line_splitter t(4);
    EXPECT_TRUE(t.feed("ab", lines));
    EXPECT_FALSE(t.feed("cde\n", lines)) << "5 bytes over two reads";
}

TEST(ExecServeFrames, ALogFrameBelowTheLoggedLevelKeepsNoMessage) {
    const std::string debug = R"({"op":"log","level":"debug","message":"detail"})";
    EXPECT_EQ(frame_of<log_frame>(debug).message, "detail");
    auto parsed = parse_frame(debug, log_level::info);
    ASSERT_TRUE(std::holds_alternative<frame>(parsed));
    const auto& l = std::get<log_frame>(std::get<frame>(parsed));
    EXPECT_EQ(l.level, "debug");
    EXPECT_EQ(l.message, "");
    auto warn = parse_frame(R"({"op":"log","level":"warn","message":"w"})", log_level::info);
    EXPECT_EQ(std::get<log_frame>(std::get<frame>(warn)).message, "w");
    auto off = parse_frame(R"({"op":"log","level":"error","message":"e"})", log_level::off);
    EXPECT_EQ(std::get<log_frame>(std::get<frame>(off)).message, "");
    EXPECT_NE(
        std::get<std::string>(parse_frame(R"({"op":"log","level":"debug")", log_level::off))
            .find("not JSON"),
        std::string::npos
    ) << "a bad frame is refused whatever the level";
}

TEST(ExecServeFrames, MessagesAreValidUtf8CutToWholeCharacters) {
    // "é" is two bytes: a cut at 200 bytes in the middle of the 100th drops it whole.
    std::string accents;
    for (int i = 0; i < 101; ++i) {
        accents += "\xC3\xA9";
    }
    const auto p = frame_of<progress_frame>(
        R"({"op":"progress","id":"a","fraction":0.5,"message":"x)" + accents + "\"}"
    );
    EXPECT_EQ(p.message, "x" + accents.substr(0, 198));
    EXPECT_NE(refusal("{\"op\":\"log\",\"message\":\"\xFF\"}").find("not JSON"), std::string::npos)
        << "invalid UTF-8 is no frame";
    EXPECT_NE(refusal(R"({"op":"log","message":"\ud800"})").find("not JSON"), std::string::npos)
        << "nor is a lone surrogate";
}

TEST(ExecServeFrames, ALargeResultOutlivesTheParsersScratch) {
    std::string big(10000, 'v');
    const auto r = frame_of<result_frame>(R"({"op":"result","id":"a","value":[")" + big + "\"]}");
    EXPECT_EQ(r.value, json::array({json::string(big)}));
}

progress_frame progress(std::string id, double f) {
    return progress_frame{std::move(id), f, "m" + std::to_string(f)};
}

/// The frames as short words: p:ID:F, log, result:ID, error:ID, ready, unknown.
std::vector<std::string> words(const std::vector<frame>& frames) {
    std::vector<std::string> out;
    for (const auto& f : frames) {
        if (const auto* p = std::get_if<progress_frame>(&f)) {
            out.push_back("p:" + p->id + ":" + std::to_string(static_cast<int>(p->fraction * 10)));
        } else if (std::holds_alternative<log_frame>(f)) {
            out.emplace_back("log");
        } else if (const auto* r = std::get_if<result_frame>(&f)) {
            out.push_back("result:" + r->id);
        } else if (const auto* e = std::get_if<error_frame>(&f)) {
            out.push_back("error:" + e->id);
        } else if (std::holds_alternative<ready_frame>(f)) {
            out.emplace_back("ready");
        } else {
            out.emplace_back("unknown");
        }
    }
    return out;
}

TEST(ExecServeFrames, OnlyTheLatestProgressOfARunOfFramesIsKept) {
    std::vector<frame> f{
        progress("a", 0.1), log_frame{"debug", ""}, progress("a", 0.2),
        unknown_frame{"x"}, progress("a", 0.3),     log_frame{"info", "hi"},
    };
    coalesce_progress(f);
    EXPECT_EQ(words(f), (std::vector<std::string>{"log", "unknown", "p:a:3", "log"}));
    EXPECT_EQ(std::get<progress_frame>(f[2]).message, "m0.300000") << "its own message";

    f = {
        progress("a", 0.1), progress("a", 0.2), result_frame{"a", 1}, progress("b", 0.5),
        progress("b", 0.6)};
    coalesce_progress(f);
    EXPECT_EQ(words(f), (std::vector<std::string>{"p:a:2", "result:a", "p:b:6"}))
        << "a result between two progress frames keeps both sides";

    f = {progress("a", 0.1), progress("b", 0.2), progress("a", 0.3), error_frame{"a", "c", "m"},
         ready_frame{},      progress("a", 0.4), ready_frame{},      progress("a", 0.5)};
    coalesce_progress(f);
    EXPECT_EQ(
        words(f), (std::vector<std::string>{
                      "p:a:1", "p:b:2", "p:a:3", "error:a", "ready", "p:a:4", "ready", "p:a:5"})
    ) << "another task's progress, an error, a ready: nothing is superseded";

    f = {};
    coalesce_progress(f);
    EXPECT_TRUE(f.empty());
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

}  // namespace ZKD_UNITY_ID
