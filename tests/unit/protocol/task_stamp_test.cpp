// SPDX-License-Identifier: MIT
// A task node split in three (task_spec | assignment | progress, docs/protocol.md §4) writes
// the bytes the one flat task struct did, and stamp() splices an assignment or a progress
// into any task node's bytes the way encode() would write them, without touching the args.
#include "protocol/task.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

// --- the flat task and its encoder, as they were before the split (for the bytes) ------------

struct legacy_task {
    std::string type;
    json::value args;
    std::vector<json::value> bundle;
    int priority = default_priority;
    std::chrono::milliseconds timeout{0};
    int max_attempts = 3;
    std::int64_t submitted_ms = 0;
    std::string client;
    int attempt = 1;
    std::int64_t epoch = 0;
    std::int64_t assigned_ms = 0;
    std::string worker;
    std::int64_t running_ms = 0;
    double progress = -1;
    std::string progress_message;
    std::int64_t progress_ms = 0;
};

json::value legacy_finite(const json::value& v) {
    if (v.is_double() && !std::isfinite(v.get_double()))
        return nullptr;
    if (v.is_array()) {
        json::array a;
        for (const auto& e : v.get_array())
            a.push_back(legacy_finite(e));
        return a;
    }
    if (v.is_object()) {
        json::object o;
        for (const auto& kv : v.get_object())
            o[kv.key()] = legacy_finite(kv.value());
        return o;
    }
    return v;
}

// The encoder of the flat struct, member for member.
std::string legacy_encode(const legacy_task& t) {
    json::object o;
    o["v"] = format_version;
    o["type"] = json::string_view(t.type.data(), t.type.size());
    if (t.bundle.empty()) {
        o["args"] = legacy_finite(t.args);
    } else {
        json::array bundle;
        for (const auto& args : t.bundle)
            bundle.push_back(legacy_finite(args));
        o["bundle"] = std::move(bundle);
    }
    o["priority"] = t.priority;
    o["timeout_ms"] = static_cast<std::int64_t>(t.timeout.count());
    o["max_attempts"] = t.max_attempts;
    o["submitted_ms"] = t.submitted_ms;
    if (!t.client.empty())
        o["client"] = json::string_view(t.client.data(), t.client.size());
    const bool assigned = t.epoch != 0 || t.assigned_ms != 0 || !t.worker.empty();
    if (assigned || t.attempt != 1)
        o["attempt"] = t.attempt;
    if (t.epoch != 0)
        o["epoch"] = t.epoch;
    if (t.assigned_ms != 0)
        o["assigned_ms"] = t.assigned_ms;
    if (!t.worker.empty())
        o["worker"] = json::string_view(t.worker.data(), t.worker.size());
    if (t.running_ms != 0)
        o["running_ms"] = t.running_ms;
    if (t.progress >= 0) {
        o["progress"] = {
            {"fraction", std::min(t.progress, 1.0)},
            {"message", json::string_view(t.progress_message.data(), t.progress_message.size())},
            {"at_ms", t.progress_ms}};
    }
    return to_text(o);
}

task_node split(const legacy_task& t) {
    task_node n;
    n.task = task_spec{t.type,    t.args,         t.bundle,       t.priority,
                       t.timeout, t.max_attempts, t.submitted_ms, t.client};
    n.assigned = assignment{t.attempt, t.epoch, t.assigned_ms, t.worker};
    n.run = progress{t.running_ms, t.progress, t.progress_message, t.progress_ms};
    return n;
}

// Args that exercise the encoder: escapes, non-ASCII, doubles, big integers, nesting.
std::vector<json::value> odd_args() {
    const double inf = std::numeric_limits<double>::infinity();
    return {
        nullptr,
        json::parse(R"({"values":[1,2,3]})"),
        json::value("quote \" backslash \\ slash / tab \t nl \n nul-free \u00e9 \U0001F600"),
        json::parse(R"({"}":"{","[":["]",{"\"":"\\"}],"":""})"),
        json::array{0.1, 1.0, -0.0, 1e-7, 12.5, 1e300, 3, -4, inf},
        json::value(std::numeric_limits<std::uint64_t>::max()),
        json::value(std::numeric_limits<std::int64_t>::min()),
        json::parse(R"([[[[[[[[[[{"deep":true}]]]]]]]]]])"),
        json::value(std::string(100 * 1024, 'x')),  // a big task
        json::object{},
        json::array{},
    };
}

std::vector<legacy_task> representative_nodes() {
    std::vector<legacy_task> all;
    for (const auto& args : odd_args()) {
        legacy_task t;
        t.type = "sum";
        t.args = args;
        t.submitted_ms = 1763733600123;
        t.client = "3fa9c2d1";
        all.push_back(t);  // pending
        auto requeued = t;
        requeued.attempt = 3;
        all.push_back(requeued);
        auto assigned = t;
        assigned.epoch = 7;
        assigned.assigned_ms = 1763733600130;
        assigned.worker = "host-1234-9f0c1a2b";
        all.push_back(assigned);
        auto running = assigned;
        running.running_ms = 1763733600200;
        all.push_back(running);
        auto reporting = running;
        reporting.progress = 0.4;
        reporting.progress_message = "resized \"4\" of 10";
        reporting.progress_ms = 1763733600300;
        all.push_back(reporting);
        reporting.progress = 1.0;
        all.push_back(reporting);
        auto direct_run = t;  // placed directly, then marked by its worker (attempt 1 written)
        direct_run.assigned_ms = 5;
        direct_run.worker = "w";
        direct_run.running_ms = 6;
        all.push_back(direct_run);
    }
    legacy_task bundle;
    bundle.type = "echo";
    bundle.bundle = odd_args();
    bundle.bundle.pop_back();  // an empty array is fine, but keep the big one
    bundle.priority = 9;
    bundle.timeout = 1500ms;
    bundle.max_attempts = 1;
    bundle.submitted_ms = 1;
    all.push_back(bundle);
    bundle.epoch = 1;
    bundle.worker = "w";
    all.push_back(bundle);
    legacy_task bare;
    bare.type = "a";
    all.push_back(bare);
    return all;
}

}  // namespace

TEST(ProtocolTaskSplit, TheSplitNodeWritesTheBytesTheFlatTaskDid) {
    for (const auto& t : representative_nodes()) {
        const auto n = split(t);
        const auto old_bytes = legacy_encode(t);
        EXPECT_EQ(encode(n), old_bytes);
        if (!n.assigned.assigned() && n.assigned.attempt == 1 && n.run == progress{}) {
            EXPECT_EQ(encode(n.task), old_bytes);
        }
        // And what the old decoder read, the new one reads (args aside: Boost.JSON 1.81 may
        // move a double by an ulp, fuzz_regressions_test.cpp).
        const auto back = decode_task_node(old_bytes);
        ASSERT_TRUE(back) << back.error().message;
        EXPECT_EQ(back->assigned, n.assigned);
        EXPECT_EQ(back->run, n.run);
        EXPECT_EQ(back->task.type, n.task.type);
        EXPECT_EQ(back->task.bundle.size(), n.task.bundle.size());
    }
}

TEST(ProtocolTaskSplit, StampingWritesWhatEncodeWritesOfTheStampedNode) {
    const std::vector<assignment> assignments{
        {1, 7, 1763733600130, "host-1234-9f0c1a2b"},  // T2
        {2, 0, 0, {}},                                // requeued (T6)
        {1, 0, 0, {}},                                // as submitted: nothing
        {0, 0, 5, "w \"q\""},                         // a direct placement: no attempt
        {1, 0, 5, "w"},                               // its worker's first write: attempt 1
    };
    const std::vector<progress> runs{
        {}, {6, -1, "", 0}, {6, 0.25, "a quarter", 7}, {6, 1.0, "", 8}, {6, 0.0, "", 9}};
    for (const auto& t : representative_nodes()) {
        const auto before = split(t);
        const auto bytes = encode(before);
        for (const auto& a : assignments) {
            // The assignment of a node not running yet, as T2, T6 and a direct T1 stamp it.
            auto unrun = stamp(bytes, progress{});
            ASSERT_TRUE(unrun);
            const auto stamped = stamp(*unrun, a);
            ASSERT_TRUE(stamped) << bytes;
            task_node expected{before.task, a, {}};
            EXPECT_EQ(*stamped, encode(expected));
            for (const auto& run : runs) {
                const auto marked = stamp(*stamped, run);
                ASSERT_TRUE(marked);
                expected.run = run;
                EXPECT_EQ(*marked, encode(expected));
                // Stamped again: the same bytes (nothing left over from the last stamp).
                EXPECT_EQ(stamp(*marked, run).value(), *marked);
                EXPECT_EQ(stamp(*marked, a).value(), *marked);
            }
        }
    }
}

TEST(ProtocolTaskSplit, StampKeepsTheArgsByteForByte) {
    // Written by another writer: members in another order, spaces, numbers as it wrote them,
    // stamped before (an older assignment and progress in the middle).
    const std::string other =
        " { \"worker\" : \"old\",\"progress\":{\"fraction\":0.5},\"type\":\"t\", \"v\":1,\n"
        "\t\"args\" : {\"n\":1.50, \"big\":123456789012345678901234567890, \"s\":\"},{\\\"\"},"
        " \"attempt\":4, \"future\":[1,{\"worker\":\"not a member of ours\"}], "
        "\"running_ms\":3 , \"epoch\":2 } ";
    ASSERT_TRUE(decode_task_node(other)) << decode_task_node(other).error().message;
    const auto stamped = stamp(other, assignment{5, 9, 10, "new"});
    ASSERT_TRUE(stamped);
    EXPECT_EQ(
        *stamped, R"({"type":"t","v":1,"args" : {"n":1.50, "big":123456789012345678901234567890, )"
                  R"("s":"},{\""},"future":[1,{"worker":"not a member of ours"}],)"
                  R"("attempt":5,"epoch":9,"assigned_ms":10,"worker":"new",)"
                  R"("progress":{"fraction":0.5},"running_ms":3})"
    );
    const auto back = decode_task_node(*stamped);
    ASSERT_TRUE(back) << *stamped;
    EXPECT_EQ(back->assigned, (assignment{5, 9, 10, "new"}));
    EXPECT_EQ(back->run.running_ms, 3);
    EXPECT_EQ(back->run.fraction, 0.5);
    EXPECT_EQ(back->task, decode_task_node(other)->task);

    const auto unrun = stamp(*stamped, progress{});
    ASSERT_TRUE(unrun);
    EXPECT_EQ(unrun->find("running_ms"), std::string::npos);
    EXPECT_EQ(unrun->find(R"("progress")"), std::string::npos);
    EXPECT_NE(unrun->find(R"("worker":"new")"), std::string::npos);
}

TEST(ProtocolTaskSplit, StampReadsEscapedAndRepeatedKeys) {
    // A key may be escaped, and a member repeated: every one of ours goes, whatever its form.
    const std::string odd =
        R"({"v":1,"type":"t","w\u006frker":"x","attempt":2,"attempt":3,"\u0061rgs":"\u0061"})";
    ASSERT_TRUE(decode_task_node(odd));
    const auto stamped = stamp(odd, assignment{4, 0, 0, {}});
    ASSERT_TRUE(stamped);
    EXPECT_EQ(*stamped, R"({"v":1,"type":"t","\u0061rgs":"\u0061","attempt":4})");
    const auto back = decode_task_node(*stamped);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->assigned, (assignment{4, 0, 0, {}}));
    EXPECT_EQ(back->task.args, json::value("a"));
}

TEST(ProtocolTaskSplit, StampRefusesWhatIsNoObject) {
    for (const std::string_view bad :
         {"",
          " ",
          "[]",
          "\"x\"",
          "1",
          "null",
          "{",
          "}",
          "{\"a\"}",
          "{\"a\":}",
          "{\"a\":1,}",
          "{\"a\":1 \"b\":2}",
          "{\"a\":[1}",
          "{\"a\":{]}",
          "{\"a\":\"x}",
          "{\"a\":1} x",
          "{\"a\":1}}",
          "{a:1}",
          "{\"a\":1,,\"b\":2}",
          "{\"a\"::1}"}) {
        EXPECT_FALSE(stamp(bad, assignment{})) << bad;
        EXPECT_FALSE(stamp(bad, progress{})) << bad;
    }
    EXPECT_EQ(stamp("{}", assignment{2, 0, 0, {}}).value(), R"({"attempt":2})");
    EXPECT_EQ(stamp(" {\n} ", progress{}).value(), "{}");
}

TEST(ProtocolTaskSplit, StampAgreesWithTheDecoderOnMutatedNodes) {
    // Whatever node decodes, stamped, decodes to the same task with the new assignment (or
    // progress), and whatever does not decode is never stamped into something that does not
    // parse (an error, or a stamp of an object).
    std::mt19937 rng(20261127);
    const auto pick = [&](std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    std::vector<std::string> seeds;
    for (const auto& t : representative_nodes()) {
        auto bytes = legacy_encode(t);
        if (bytes.size() < 4096)
            seeds.push_back(std::move(bytes));
    }
    static constexpr std::string_view tokens[] = {
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        " ",
        "null",
        "1",
        "-2.5e3",
        "\"worker\":\"z\"",
        "\"attempt\":7",
        "\"progress\":{\"fraction\":1}",
        "\"running_ms\":5",
        "\"\\u0077orker\""};
    const assignment a{6, 3, 4, "w-\u00e9"};
    const progress p{8, 0.5, "m", 9};
    int decoded = 0;
    for (int i = 0; i < 20'000; ++i) {
        std::string s = seeds[pick(seeds.size())];
        for (std::size_t k = 0, n = 1 + pick(3); k < n; ++k) {
            const auto at = pick(s.size() + 1);
            const auto tok = tokens[pick(std::size(tokens))];
            if (pick(2) == 0) {
                s.insert(at, tok);
            } else {
                s.erase(at, std::min<std::size_t>(1 + pick(4), s.size() - at));
            }
        }
        const auto node = decode_task_node(s);
        const auto stamped = stamp(s, a);
        const auto marked = stamp(s, p);
        if (!node) {
            if (stamped) {
                boost::system::error_code ec;
                (void)parse_json(*stamped, ec);  // may still be no task; no crash, no throw
            }
            continue;
        }
        ++decoded;
        ASSERT_TRUE(stamped) << s;
        ASSERT_TRUE(marked) << s;
        const auto back = decode_task_node(*stamped);
        ASSERT_TRUE(back) << s << " -> " << *stamped;
        EXPECT_EQ(encode(back->task), encode(node->task)) << s;
        EXPECT_EQ(back->assigned, a) << s;
        EXPECT_EQ(back->run, node->run) << s;
        const auto back2 = decode_task_node(*marked);
        ASSERT_TRUE(back2) << s << " -> " << *marked;
        EXPECT_EQ(encode(back2->task), encode(node->task)) << s;
        EXPECT_EQ(back2->assigned, node->assigned) << s;
        EXPECT_EQ(back2->run, p) << s;
        if (HasFailure())
            break;
    }
    EXPECT_GT(decoded, 1000);
}

TEST(ProtocolTaskSplit, TheFieldsOfDelaysAndRetriesAreTheTasksAndSurviveEveryStamp) {
    // §4.3's members (`due_ms`, `retries`, `backoff_ms`, `backoff_max_ms`, a retry's `try`
    // and `errors`) are neither the assignment's nor the progress': encode() writes them
    // with the task's, decode reads them into task_spec::timing, and no stamp drops them.
    const auto timing = json::parse(R"({"due_ms":1763733700000,"retries":2,"backoff_ms":100,)"
                                    R"("backoff_max_ms":900,"try":2,"errors":[{"try":1,)"
                                    R"("code":"handler_error","message":"x","finished_ms":1}]})")
                            .as_object();
    for (const auto& t : representative_nodes()) {
        auto before = split(t);
        before.task.timing = timing;
        const auto bytes = encode(before);
        const auto decoded = decode_task_node(bytes);
        ASSERT_TRUE(decoded) << decoded.error().message;
        EXPECT_EQ(decoded->task.timing, timing);
        EXPECT_EQ(decoded->assigned, before.assigned);
        EXPECT_EQ(decoded->run, before.run);
        EXPECT_NE(encode(before.task).find(R"("try":2)"), std::string::npos);
        for (const auto& a : {assignment{1, 7, 10, "w"}, assignment{3, 0, 0, {}}}) {
            const auto stamped = stamp(bytes, a);
            ASSERT_TRUE(stamped);
            EXPECT_EQ(*stamped, encode(task_node{before.task, a, before.run}));
            const auto marked = stamp(*stamped, progress{11, 0.5, "half", 12});
            ASSERT_TRUE(marked);
            const auto back = decode_task_node(*marked);
            ASSERT_TRUE(back);
            EXPECT_EQ(back->task.timing, timing);
        }
    }
    // Members of another part in the timing are not its to write.
    task_spec odd;
    odd.type = "t";
    odd.timing["attempt"] = 9;
    odd.timing["running_ms"] = 9;
    odd.timing["type"] = "not this";
    odd.timing["due_ms"] = 5;
    EXPECT_EQ(
        encode(odd),
        R"({"v":1,"type":"t","args":null,"priority":5,"timeout_ms":0,"max_attempts":3,)"
        R"("submitted_ms":0,"due_ms":5})"
    );
}

}  // namespace ZKD_UNITY_ID
