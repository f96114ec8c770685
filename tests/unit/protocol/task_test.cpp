// SPDX-License-Identifier: MIT
// The JSON codec of docs/protocol.md §2, §4, §5: exact encodings, validation, and decoders that
// survive any input. Over 700 lines: one test file per codec file (protocol/task.cpp).
#include "protocol/task.hpp"

#include "protocol/master_txn.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

task_spec example_task() {
    task_spec t;
    t.type = "sum";
    t.args = json::parse(R"({"values":[1,2,3]})");
    t.submitted_ms = 1763733600123;
    t.client = "3fa9c2d1";
    return t;
}

task_node assigned_task() {
    task_node n{example_task(), {}, {}};
    n.assigned = assignment{1, 7, 1763733600130, "host-1234-9f0c1a2b"};
    return n;
}

// Decodes `data` and expects the refusal to mention `needle`.
template <class Decode>
void expect_refused(Decode decode, std::string_view data, std::string_view needle) {
    const auto r = decode(data);
    ASSERT_FALSE(r) << data;
    EXPECT_NE(r.error().message.find(needle), std::string::npos)
        << data << " -> " << r.error().message;
}

// --- states ----------------------------------------------------------------------------------

TEST(ProtocolTaskState, Names) {
    const std::vector<std::pair<task_state, std::string_view>> all{
        {task_state::pending, "pending"},     {task_state::assigned, "assigned"},
        {task_state::running, "running"},     {task_state::succeeded, "succeeded"},
        {task_state::failed, "failed"},       {task_state::timed_out, "timed_out"},
        {task_state::cancelled, "cancelled"}, {task_state::lost, "lost"},
        {task_state::unknown, "unknown"},     {task_state::delayed, "delayed"},
    };
    for (const auto& [state, name] : all) {
        EXPECT_EQ(to_string(state), name);
        EXPECT_EQ(parse_task_state(name), state);
    }
    for (const auto* bad : {"", "Pending", "timed-out", "done"}) {
        EXPECT_FALSE(parse_task_state(bad)) << bad;
    }
    EXPECT_TRUE(is_result_state(task_state::succeeded));
    EXPECT_TRUE(is_result_state(task_state::lost));
    EXPECT_FALSE(is_result_state(task_state::running));
    EXPECT_FALSE(is_result_state(task_state::unknown));
    EXPECT_FALSE(is_result_state(task_state::delayed));
}

// --- tasks -----------------------------------------------------------------------------------

TEST(ProtocolTaskCodec, EncodesTheProtocolExample) {
    EXPECT_EQ(
        encode(example_task()),
        R"({"v":1,"type":"sum","args":{"values":[1,2,3]},"priority":5,"timeout_ms":0,)"
        R"("max_attempts":3,"submitted_ms":1763733600123,"client":"3fa9c2d1"})"
    );
    EXPECT_EQ(
        encode(assigned_task()),
        R"({"v":1,"type":"sum","args":{"values":[1,2,3]},"priority":5,"timeout_ms":0,)"
        R"("max_attempts":3,"submitted_ms":1763733600123,"client":"3fa9c2d1","attempt":1,)"
        R"("epoch":7,"assigned_ms":1763733600130,"worker":"host-1234-9f0c1a2b"})"
    );
}

TEST(ProtocolTaskCodec, RoundTrips) {
    auto running = assigned_task();
    running.run.running_ms = 1763733600200;
    running.run.fraction = 0.25;
    running.run.message = "a \"quarter\"";
    running.run.at_ms = 1763733600300;
    running.assigned.attempt = 2;
    running.task.priority = 9;
    running.task.timeout = 1500ms;
    running.task.max_attempts = 1;
    task_node requeued{example_task(), {}, {}};
    requeued.assigned.attempt = 3;
    task_node bare;
    bare.task.type = "a";
    for (const auto& t :
         {task_node{example_task(), {}, {}}, assigned_task(), running, requeued, bare}) {
        const auto data = encode(t);
        const auto back = decode_task_node(data);
        ASSERT_TRUE(back) << data << ": " << back.error().message;
        EXPECT_EQ(*back, t) << data;
    }
    EXPECT_EQ(encode(task_node{example_task(), {}, {}}), encode(example_task()));
    EXPECT_NE(encode(requeued).find(R"("attempt":3)"), std::string::npos);
    EXPECT_EQ(encode(bare).find("client"), std::string::npos);
    EXPECT_EQ(encode(bare).find(R"("attempt")"), std::string::npos);
    // A direct placement's stamp leaves the attempt out (§6 T1); decoded, it is 1.
    task_node direct{example_task(), assignment{0, 0, 5, "w"}, {}};
    EXPECT_EQ(encode(direct).find(R"("attempt")"), std::string::npos);
    EXPECT_EQ(decode_task_node(encode(direct))->assigned, (assignment{1, 0, 5, "w"}));
}

TEST(ProtocolTaskCodec, DefaultsAndUnknownFields) {
    const auto t = decode_task_node(R"({"v":1,"type":"sum","future":{"x":[1]},"zz":null})");
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->task.type, "sum");
    EXPECT_TRUE(t->task.args.is_null());
    EXPECT_EQ(t->task.priority, 5);
    EXPECT_EQ(t->task.timeout, 0ms);
    EXPECT_EQ(t->task.max_attempts, 3);
    EXPECT_EQ(t->assigned.attempt, 1);
    EXPECT_EQ(t->assigned.epoch, 0);
    EXPECT_EQ(t->assigned.worker, "");
    // null counts as absent; whole doubles count as integers.
    const auto u = decode_task_node(R"({"v":1.0,"type":"x","priority":null,"timeout_ms":2e3})");
    ASSERT_TRUE(u) << u.error().message;
    EXPECT_EQ(u->task.priority, 5);
    EXPECT_EQ(u->task.timeout, 2000ms);
}

TEST(ProtocolTaskCodec, ArgsAreAnyJson) {
    for (const auto* args :
         {"null", "0", "-1.5", "\"text\"", "[]", "[1,[2,[3]]]", "{}",
          R"({"a":{"b":[true,false,null]}})", "18446744073709551615"}) {
        const auto data = std::string(R"({"v":1,"type":"t","args":)") + args + "}";
        const auto t = decode_task_node(data);
        ASSERT_TRUE(t) << data << ": " << t.error().message;
        EXPECT_EQ(t->task.args, json::parse(args)) << data;
        EXPECT_EQ(decode_task_node(encode(*t)).value(), *t);
    }
}

TEST(ProtocolTaskCodec, Validation) {
    const auto d = [](std::string_view s) { return decode_task_node(s); };
    expect_refused(d, R"({"v":1})", R"("type" is missing)");
    expect_refused(d, R"({"v":1,"type":""})", R"("type")");
    expect_refused(d, R"({"v":1,"type":"a b"})", R"("type")");
    expect_refused(d, R"({"v":1,"type":"a/b"})", R"("type")");
    expect_refused(d, R"({"v":1,"type":"\u00e9"})", R"("type")");
    expect_refused(d, R"({"v":1,"type":7})", R"("type" must be a string)");
    expect_refused(d, R"({"v":1,"type":")" + std::string(129, 'x') + R"("})", R"("type")");
    EXPECT_TRUE(decode_task_node("{\"v\":1,\"type\":\"" + std::string(128, 'x') + "\"}"));
    EXPECT_TRUE(decode_task_node(R"({"v":1,"type":"Az09_.:-"})"));
    expect_refused(d, R"({"v":1,"type":"t","priority":10})", R"("priority")");
    expect_refused(d, R"({"v":1,"type":"t","priority":-1})", R"("priority")");
    expect_refused(d, R"({"v":1,"type":"t","priority":"5"})", R"("priority")");
    expect_refused(d, R"({"v":1,"type":"t","priority":4.5})", R"("priority")");
    expect_refused(d, R"({"v":1,"type":"t","max_attempts":0})", R"("max_attempts")");
    expect_refused(d, R"({"v":1,"type":"t","max_attempts":3000000000})", R"("max_attempts")");
    expect_refused(d, R"({"v":1,"type":"t","max_attempts":1001})", R"("max_attempts")");
    expect_refused(d, R"({"v":1,"type":"t","timeout_ms":-1})", R"("timeout_ms")");
    expect_refused(d, R"({"v":1,"type":"t","attempt":0})", R"("attempt")");
    expect_refused(d, R"({"v":1,"type":"t","epoch":-2})", R"("epoch")");
    expect_refused(d, R"({"v":1,"type":"t","worker":5})", R"("worker")");
    expect_refused(d, R"({"v":1,"type":"t","client":[]})", R"("client")");
    expect_refused(d, R"({"v":1,"type":"t","submitted_ms":1e300})", R"("submitted_ms")");
    expect_refused(
        d, R"({"v":1,"type":"t","submitted_ms":18446744073709551615})", R"("submitted_ms")"
    );

    // validate() enforces the same on a task about to be encoded.
    auto t = example_task();
    EXPECT_TRUE(validate(t));
    t.priority = 10;
    EXPECT_FALSE(validate(t));
    t = example_task();
    t.type = "bad type";
    EXPECT_FALSE(validate(t));
    t = example_task();
    t.timeout = -1ms;
    EXPECT_FALSE(validate(t));
    t = example_task();
    t.max_attempts = 0;
    EXPECT_FALSE(validate(t));
    t.max_attempts = max_attempts_limit + 1;
    EXPECT_FALSE(validate(t));
    t.max_attempts = max_attempts_limit;
    EXPECT_TRUE(validate(t));
    EXPECT_THROW(decode_task_node("nope").value(), std::invalid_argument);
}

TEST(ProtocolTaskCodec, NestingLimitAgreesWithValidate) {
    const auto nested = [](std::size_t depth) {
        json::value v = 1;
        for (std::size_t i = 0; i < depth; ++i) {
            json::array a;
            a.push_back(std::move(v));
            v = std::move(a);
        }
        return v;
    };
    auto t = example_task();
    t.args = nested(max_json_depth - 1);
    EXPECT_TRUE(validate(t));
    const auto ok = decode_task_node(encode(t));
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->task, t);
    t.args = nested(max_json_depth);
    EXPECT_FALSE(validate(t));
    EXPECT_FALSE(decode_task_node(encode(t)));
}

TEST(ProtocolTaskCodec, InfinityIsNotJson) {
    auto t = example_task();
    const double inf = std::numeric_limits<double>::infinity();
    t.args = json::array{1.0, inf, json::object{{"x", -inf}}};
    const auto invalid = validate(t);
    ASSERT_FALSE(invalid);
    EXPECT_NE(invalid.error().message.find("infinite"), std::string::npos);
    // Encoding still yields JSON, with null in place of each infinity.
    const auto back = decode_task_node(encode(t));
    ASSERT_TRUE(back) << encode(t) << ": " << back.error().message;
    EXPECT_EQ(back->task.args, json::parse(R"([1.0,null,{"x":null}])"));
}

TEST(ProtocolTaskCodec, FormatVersion) {
    const auto d = [](std::string_view s) { return decode_task_node(s); };
    expect_refused(d, R"({"v":2,"type":"t"})", "unsupported format version 2");
    expect_refused(d, R"({"v":99,"type":"t"})", "unsupported format version 99");
    expect_refused(d, R"({"v":18446744073709551615,"type":"t"})", "unsupported format version");
    expect_refused(d, R"({"v":1.5,"type":"t"})", "unsupported format version");
    expect_refused(d, R"({"v":0,"type":"t"})", "invalid format version 0");
    expect_refused(d, R"({"v":-1,"type":"t"})", "invalid format version -1");
    expect_refused(d, R"({"v":"1","type":"t"})", "format version is not a number");
    expect_refused(d, R"({"v":null,"type":"t"})", "format version is not a number");
    expect_refused(d, R"({"type":"t"})", "no format version");
    expect_refused(d, "", "not JSON");
    expect_refused(d, "{", "not JSON");
    expect_refused(d, R"({"v":1,"type":"t"} x)", "not JSON");
    expect_refused(d, "[1]", "not a JSON object");
    expect_refused(d, "\"v\"", "not a JSON object");
    expect_refused(d, std::string_view("{\"v\":1,\"type\":\"t\0\"}", 18), "not JSON");
    expect_refused(d, "{\"v\":1,\"type\":\"\xff\"}", "not JSON");  // not UTF-8
    expect_refused(d, std::string(100000, '['), "not JSON");
    expect_refused(d, R"({"v":1,"type":"t","args":[1e999]})", "out of range");
    expect_refused(d, R"({"v":1,"type":"t","args":{"x":-1e999}})", "out of range");
}

TEST(ProtocolTaskCodec, SizeLimit) {
    EXPECT_EQ(max_task_bytes, 512U * 1024U);
    EXPECT_TRUE(task_size_ok(std::string(max_task_bytes, 'x')));
    EXPECT_FALSE(task_size_ok(std::string(max_task_bytes + 1, 'x')));
    EXPECT_TRUE(task_size_ok(std::string(1000, 'x'), 1000));
    EXPECT_FALSE(task_size_ok(std::string(1001, 'x'), 1000));
    // Configurable down, not up.
    EXPECT_FALSE(task_size_ok(std::string(max_task_bytes + 1, 'x'), 4 * max_task_bytes));
    auto t = example_task();
    t.args = json::string(std::string(max_task_bytes, 'a'));
    EXPECT_FALSE(task_size_ok(encode(t)));
    EXPECT_TRUE(result_size_ok(std::string(max_result_bytes, 'x')));
    EXPECT_FALSE(result_size_ok(std::string(max_result_bytes + 1, 'x')));
}

// --- results ---------------------------------------------------------------------------------

TEST(ProtocolResultCodec, SucceededAndFailed) {
    task_result ok;
    ok.task = "t4-1763733600123-3fa9c2d100002a";
    ok.value = json::parse(R"({"sum":6})");
    ok.attempt = 1;
    ok.worker = "host-1234-9f0c1a2b";
    ok.started_ms = 1763733600131;
    ok.finished_ms = 1763733600140;
    EXPECT_EQ(
        encode(ok), R"({"v":1,"task":"t4-1763733600123-3fa9c2d100002a","state":"succeeded",)"
                    R"("value":{"sum":6},"attempt":1,"worker":"host-1234-9f0c1a2b",)"
                    R"("started_ms":1763733600131,"finished_ms":1763733600140})"
    );

    task_result lost;
    lost.task = ok.task;
    lost.state = task_state::lost;
    lost.error = task_error{std::string(codes::attempts_exhausted), "3 workers died"};
    EXPECT_EQ(
        encode(lost), R"({"v":1,"task":"t4-1763733600123-3fa9c2d100002a","state":"lost",)"
                      R"("error":{"code":"attempts_exhausted","message":"3 workers died"}})"
    );

    task_result null_value;
    null_value.task = "x";
    for (const auto& r : {ok, lost, null_value}) {
        const auto back = decode_result(encode(r));
        ASSERT_TRUE(back) << encode(r) << ": " << back.error().message;
        EXPECT_EQ(*back, r);
    }
}

TEST(ProtocolResultCodec, EveryStateAndCode) {
    for (const auto state :
         {task_state::failed, task_state::timed_out, task_state::cancelled, task_state::lost}) {
        for (const auto code :
             {codes::handler_error, codes::unknown_type, codes::bad_args, codes::malformed_task,
              codes::result_too_large, codes::timeout, codes::cancelled, codes::attempts_exhausted,
              codes::output_too_large, codes::memory_limit, codes::cpu_limit, codes::process_limit,
              codes::open_files_limit}) {
            EXPECT_TRUE(is_known_error_code(code));
            task_result r;
            r.task = "t";
            r.state = state;
            r.error = task_error{std::string(code), "why"};
            r.value = 5;  // not written unless succeeded
            const auto back = decode_result(encode(r));
            ASSERT_TRUE(back) << back.error().message;
            EXPECT_EQ(back->state, state);
            EXPECT_EQ(back->error, r.error);
            EXPECT_TRUE(back->value.is_null());
        }
    }
    EXPECT_FALSE(is_known_error_code("new_code"));
    // A code we don't know is still a result (from a newer writer).
    const auto newer =
        decode_result(R"({"v":1,"task":"t","state":"failed","error":{"code":"new_code"},"extra":1})"
        );
    ASSERT_TRUE(newer) << newer.error().message;
    EXPECT_EQ(newer->error->code, "new_code");
    EXPECT_EQ(newer->error->message, "");
}

TEST(ProtocolResultCodec, Validate) {
    task_result r;
    r.task = "t";
    EXPECT_TRUE(validate(r));
    r.value = std::numeric_limits<double>::infinity();
    EXPECT_FALSE(validate(r));
    EXPECT_EQ(encode(r), R"({"v":1,"task":"t","state":"succeeded","value":null})");
    r.state = task_state::failed;
    EXPECT_FALSE(validate(r));  // no error
    r.error = task_error{"", "m"};
    EXPECT_FALSE(validate(r));  // empty code
    r.error->code = codes::handler_error;
    EXPECT_TRUE(validate(r));  // value is not written unless succeeded
    r.state = task_state::running;
    EXPECT_FALSE(validate(r));
    r.state = task_state::cancelled;
    r.task.clear();
    EXPECT_FALSE(validate(r));
}

TEST(ProtocolResultCodec, Refusals) {
    const auto d = [](std::string_view s) { return decode_result(s); };
    expect_refused(d, R"({"v":1,"state":"succeeded"})", R"("task" is missing)");
    expect_refused(d, R"({"v":1,"task":"","state":"succeeded"})", R"("task" is empty)");
    expect_refused(d, R"({"v":1,"task":"t"})", R"("state" is missing)");
    expect_refused(d, R"({"v":1,"task":"t","state":"running"})", "not a result state");
    expect_refused(d, R"({"v":1,"task":"t","state":"bogus"})", "not a result state");
    expect_refused(d, R"({"v":1,"task":"t","state":"failed"})", "needs an error");
    expect_refused(d, R"({"v":1,"task":"t","state":"failed","error":"x"})", "must be an object");
    expect_refused(d, R"({"v":1,"task":"t","state":"failed","error":{}})", R"("code" is missing)");
    expect_refused(d, R"({"v":1,"task":"t","state":"failed","error":{"code":""}})", "empty");
    expect_refused(d, R"({"v":1,"task":"t","state":"failed","error":{"code":1}})", "string");
    expect_refused(d, R"({"v":1,"task":"t","state":"succeeded","attempt":-1})", R"("attempt")");
    expect_refused(d, R"({"v":2,"task":"t","state":"succeeded"})", "unsupported format version 2");
}

// --- bundles (§4.1, §5.1) ---------------------------------------------------------------------

TEST(ProtocolBundleCodec, ATaskBundleRoundTrips) {
    task_spec t;
    t.type = "sum";
    t.bundle = {json::array{1, 2}, json::array{3}, nullptr};
    t.submitted_ms = 7;
    EXPECT_TRUE(validate(t));
    const auto text = encode(t);
    EXPECT_EQ(
        text, R"({"v":1,"type":"sum","bundle":[[1,2],[3],null],"priority":5,)"
              R"("timeout_ms":0,"max_attempts":3,"submitted_ms":7})"
    );
    const auto back = decode_task_node(text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->task, t);
}

TEST(ProtocolBundleCodec, ATaskBundleIsChecked) {
    const auto d = [](std::string_view s) { return decode_task_node(s); };
    expect_refused(d, R"({"v":1,"type":"sum","bundle":[]})", "non-empty array");
    expect_refused(d, R"({"v":1,"type":"sum","bundle":{"a":1}})", "non-empty array");
    expect_refused(d, R"({"v":1,"type":"sum","bundle":[1],"args":2})", "has no field");
    task_spec t;
    t.type = "echo";
    t.bundle.assign(1001, json::value(1));
    EXPECT_FALSE(validate(t));
    t.bundle.resize(1000);
    EXPECT_TRUE(validate(t));
    // A bundled task's args sit one level deeper than a task's.
    json::value deep = 0;
    for (std::size_t i = 0; i + 2 < max_json_depth; ++i)
        deep = json::array{deep};
    t.bundle = {deep};
    EXPECT_TRUE(validate(t));
    EXPECT_TRUE(decode_task_node(encode(t)));
    t.bundle = {json::array{deep}};
    EXPECT_FALSE(validate(t));
}

TEST(ProtocolBundleCodec, ABundlesResultRoundTripsAndSplits) {
    task_result whole;
    whole.task = "t4-1763733600123-3fa9c2d100002a_3";
    whole.state = task_state::failed;
    whole.error = task_error{"handler_error", "1 of 3 tasks of the bundle did not succeed"};
    whole.attempt = 2;
    whole.worker = "host-1-9f0c1a2b";
    whole.finished_ms = 9;
    task_result ok;
    ok.value = 6;
    task_result bad;
    bad.state = task_state::failed;
    bad.error = task_error{"bad_args", "no"};
    whole.bundle = {ok, bad, ok};
    whole.consumed = {0, 2};
    EXPECT_TRUE(validate(whole));
    const auto text = encode(whole);
    EXPECT_NE(
        text.find(R"("bundle":[{"state":"succeeded","value":6},{"state":"failed",)"
                  R"("error":{"code":"bad_args","message":"no"}},{"state":"succeeded",)"
                  R"("value":6}],"consumed":[0,2])"),
        std::string::npos
    ) << text;
    auto back = decode_result(text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, whole);

    const auto second = bundled_result(*back, 1, whole.task + ".1");
    ASSERT_TRUE(second);
    EXPECT_EQ(second->task, whole.task + ".1");
    EXPECT_EQ(second->state, task_state::failed);
    EXPECT_EQ(second->error->code, "bad_args");
    EXPECT_EQ(second->attempt, 2);
    EXPECT_EQ(second->worker, whole.worker);
    EXPECT_TRUE(second->bundle.empty());
    EXPECT_FALSE(bundled_result(*back, 3, "x"));

    // A result without entries (the master's: lost, cancelled) stands for every task.
    task_result cancelled;
    cancelled.task = whole.task;
    cancelled.state = task_state::cancelled;
    cancelled.error = task_error{"cancelled", "cancelled"};
    cancelled.consumed = {1};
    const auto any = bundled_result(cancelled, 2, whole.task + ".2");
    ASSERT_TRUE(any);
    EXPECT_EQ(any->state, task_state::cancelled);
    EXPECT_EQ(any->task, whole.task + ".2");
    EXPECT_TRUE(any->consumed.empty());
}

TEST(ProtocolBundleCodec, ABundlesResultIsChecked) {
    const auto d = [](std::string_view s) { return decode_result(s); };
    const std::string head = R"({"v":1,"task":"t","state":"succeeded",)";
    expect_refused(d, head + R"("bundle":3})", "must be an array");
    expect_refused(d, head + R"("bundle":[1]})", "non-object");
    expect_refused(d, head + R"("bundle":[{"state":"failed"}]})", "bundle: a result in state");
    expect_refused(d, head + R"("bundle":[{"state":"running"}]})", "bundle: field");
    expect_refused(d, head + R"("consumed":[-1]})", "consumed");
    expect_refused(d, head + R"("consumed":[1000]})", "consumed");
    expect_refused(d, head + R"("consumed":"x"})", "consumed");
    const auto dup = decode_result(head + R"("consumed":[2,0,2]})");
    ASSERT_TRUE(dup);
    EXPECT_EQ(dup->consumed, (std::vector<std::size_t>{0, 2}));
    expect_refused(d, head + R"("published":[-1]})", "published");
    expect_refused(d, head + R"("published":{}})", "published");
    const auto pub = decode_result(head + R"("published":[3,1,3]})");
    ASSERT_TRUE(pub);
    EXPECT_EQ(pub->published, (std::vector<std::size_t>{1, 3}));
}

TEST(ProtocolBundleCodec, TheTasksPublishedEarlyRoundTripAndStayOutOfAnEntry) {
    task_result whole;
    whole.task = "t4-1763733600123-3fa9c2d100002a_3";
    task_result ok;
    ok.value = 1;
    whole.bundle = {ok, ok, ok};
    whole.consumed = {2};
    whole.published = {0, 1};
    const auto text = encode(whole);
    EXPECT_NE(text.find(R"("published":[0,1])"), std::string::npos) << text;
    EXPECT_NE(text.find(R"("consumed":[2])"), std::string::npos) << text;
    const auto back = decode_result(text);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, whole);
    whole.bundle.clear();  // a result for every task: a task's copy lists nothing
    const auto any = bundled_result(whole, 2, whole.task + ".2");
    ASSERT_TRUE(any);
    EXPECT_TRUE(any->published.empty());
    EXPECT_TRUE(any->consumed.empty());
    task_result none;  // not written when empty
    none.task = "t";
    EXPECT_EQ(encode(none).find("published"), std::string::npos);
}

TEST(ProtocolBundleCodec, OnlyABundleSaysItReadsEarlyResultsAndOnlyTrueCounts) {
    task_spec t;
    t.type = "sum";
    t.bundle = {json::array{1}, json::array{2}};
    t.entry_results = true;
    const auto text = encode(t);
    EXPECT_NE(text.find(R"("entry_results":true)"), std::string::npos) << text;
    const auto back = decode_task_node(text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_TRUE(back->task.entry_results);
    EXPECT_EQ(back->task, t);

    t.entry_results = false;
    EXPECT_EQ(encode(t).find("entry_results"), std::string::npos);
    task_spec plain;
    plain.type = "sum";
    plain.args = 1;
    plain.entry_results = true;  // a plain task has no bundle to say it of
    EXPECT_EQ(encode(plain).find("entry_results"), std::string::npos);

    // Garbage is its absence (the node stays a valid bundle).
    for (const auto* garbage : {R"("yes")", "1", "null", "false"}) {
        auto node = encode(t);
        node.insert(node.size() - 1, std::string(R"(,"entry_results":)") + garbage);
        const auto read = decode_task_node(node);
        ASSERT_TRUE(read) << node;
        EXPECT_FALSE(read->task.entry_results) << node;
    }
}

// --- members, meta, epoch, cancel -----------------------------------------------------------

TEST(ProtocolMemberCodec, WorkerCandidateMaster) {
    member_info w;
    w.id = "host-1234-9f0c1a2b";
    w.host = "host";
    w.pid = 1234;
    w.capacity = 4;
    w.types = {"md5", "sum"};
    w.started_ms = 1763733600000;
    EXPECT_EQ(
        encode(w), R"({"v":1,"id":"host-1234-9f0c1a2b","host":"host","pid":1234,)"
                   R"("capacity":4,"types":["md5","sum"],"started_ms":1763733600000})"
    );
    EXPECT_EQ(decode_worker(encode(w)).value(), w);
    EXPECT_EQ(decode_member(encode(w)).value(), w);
    expect_refused(
        [](std::string_view s) { return decode_master(s); }, encode(w), R"("epoch" is missing)"
    );

    member_info c;
    c.id = w.id;
    c.host = "host";
    c.pid = 1234;
    EXPECT_EQ(encode(c), R"({"v":1,"id":"host-1234-9f0c1a2b","host":"host","pid":1234})");
    EXPECT_EQ(decode_member(encode(c)).value(), c);
    expect_refused(
        [](std::string_view s) { return decode_worker(s); }, encode(c), R"("capacity" is missing)"
    );

    member_info m = c;
    m.epoch = 7;
    m.since_ms = 1763733600500;
    EXPECT_EQ(
        encode(m), R"({"v":1,"id":"host-1234-9f0c1a2b","epoch":7,"host":"host","pid":1234,)"
                   R"("since_ms":1763733600500})"
    );
    EXPECT_EQ(decode_master(encode(m)).value(), m);
    m.throughput = 12.25;
    EXPECT_EQ(decode_master(encode(m)).value(), m);
}

TEST(ProtocolMemberCodec, DrainingAndThroughput) {
    const auto w = decode_worker(R"({"v":1,"id":"a","capacity":2,"types":[],"draining":true})");
    ASSERT_TRUE(w) << w.error().message;
    EXPECT_TRUE(w->draining);
    EXPECT_NE(encode(*w).find(R"("draining":true)"), std::string::npos);
    const auto m = decode_master(R"({"v":1,"id":"a","epoch":2,"throughput":3})");
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(m->throughput, 3.0);
    const auto d = [](std::string_view s) { return decode_worker(s); };
    expect_refused(d, R"({"v":1,"id":"a","capacity":2,"types":[],"draining":1})", "true or false");
    const auto dm = [](std::string_view s) { return decode_master(s); };
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"throughput":-1})", R"("throughput")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"throughput":"fast"})", R"("throughput")");
}

// Types a worker cannot run now (docs/protocol.md §2): written only when some are.
TEST(ProtocolMemberCodec, WorkerUnhealthyTypes) {
    member_info w;
    w.id = "a";
    w.capacity = 2;
    w.types = {"embed", "sum"};
    EXPECT_EQ(encode(w).find("unhealthy"), std::string::npos);
    w.unhealthy = {"embed"};
    EXPECT_EQ(
        encode(w),
        R"({"v":1,"id":"a","host":"","pid":0,"capacity":2,"types":["embed","sum"],"unhealthy":["embed"]})"
    );
    EXPECT_EQ(decode_worker(encode(w)).value(), w);
    // Sorted and unique once read; absent: none (a worker before the field).
    const auto r =
        decode_worker(R"({"v":1,"id":"a","capacity":2,"types":["x","y"],"unhealthy":["y","x","y"]})"
        );
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->unhealthy, (std::vector<std::string>{"x", "y"}));
    EXPECT_TRUE(
        decode_worker(R"({"v":1,"id":"a","capacity":2,"types":[]})").value().unhealthy.empty()
    );
    const auto d = [](std::string_view s) { return decode_worker(s); };
    expect_refused(
        d, R"({"v":1,"id":"a","capacity":2,"types":[],"unhealthy":"x"})", R"("unhealthy")"
    );
    expect_refused(
        d, R"({"v":1,"id":"a","capacity":2,"types":[],"unhealthy":[""]})", R"("unhealthy")"
    );
}

// The rules a member follows beyond the format (docs/protocol.md §2 "Features"): written
// only when some are; names this zkd does not know are kept.
TEST(ProtocolMemberCodec, Features) {
    member_info m;
    m.id = "a";
    m.epoch = 2;
    EXPECT_EQ(encode(m).find("features"), std::string::npos);
    m.features = own_features();
    EXPECT_TRUE(std::ranges::binary_search(m.features, feature_entry_results));
    EXPECT_EQ(
        encode(m), R"({"v":1,"id":"a","epoch":2,"host":"","pid":0,"features":["entry_results"]})"
    );
    EXPECT_EQ(decode_master(encode(m)).value(), m);
    const auto r = decode_master(
        R"({"v":1,"id":"a","epoch":2,"features":["zz_later","entry_results","zz_later"]})"
    );
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->features, (std::vector<std::string>{"entry_results", "zz_later"}));
    EXPECT_TRUE(decode_master(R"({"v":1,"id":"a","epoch":2})").value().features.empty());
    const auto dm = [](std::string_view s) { return decode_master(s); };
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"features":"entry_results"})", R"("features")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"features":[1]})", R"("features")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"features":[""]})", R"("features")");
    // What clients rely on: a /master whose features differ is written again.
    auto other = m;
    other.features.clear();
    EXPECT_TRUE(master_node_says(m, encode(m)));
    EXPECT_FALSE(master_node_says(m, encode(other)));
}

// What a worker runs side by side, for placement (docs/protocol.md §2, §7 "Master loop").
TEST(ProtocolMemberCodec, WorkerThreads) {
    member_info w;
    w.id = "a";
    w.capacity = 8;
    w.threads = 2;
    EXPECT_EQ(
        encode(w), R"({"v":1,"id":"a","host":"","pid":0,"capacity":8,"threads":2,"types":[]})"
    );
    EXPECT_EQ(decode_worker(encode(w)).value(), w);
    // A worker before the field says nothing.
    EXPECT_FALSE(decode_worker(R"({"v":1,"id":"a","capacity":2,"types":[]})").value().threads);
    const auto d = [](std::string_view s) { return decode_worker(s); };
    expect_refused(d, R"({"v":1,"id":"a","capacity":2,"types":[],"threads":0})", R"("threads")");
    expect_refused(d, R"({"v":1,"id":"a","capacity":2,"types":[],"threads":"2"})", R"("threads")");
    expect_refused(
        d, R"({"v":1,"id":"a","capacity":2,"types":[],"threads":4294967296})", R"("threads")"
    );
}

// The bound on pending tasks the master publishes (docs/protocol.md §2, §7 "Client").
TEST(ProtocolMemberCodec, MasterMaxPending) {
    member_info m;
    m.id = "a";
    m.epoch = 2;
    m.max_pending = 5;
    EXPECT_EQ(encode(m), R"({"v":1,"id":"a","epoch":2,"host":"","pid":0,"max_pending":5})");
    EXPECT_EQ(decode_master(encode(m)).value(), m);
    m.max_pending = 0;  // no bound, said
    EXPECT_EQ(decode_master(encode(m)).value().max_pending, 0);
    // A master before the bound says nothing.
    EXPECT_FALSE(decode_master(R"({"v":1,"id":"a","epoch":2})").value().max_pending);
    const auto dm = [](std::string_view s) { return decode_master(s); };
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"max_pending":-1})", R"("max_pending")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"max_pending":"lots"})", R"("max_pending")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"max_pending":1.5})", R"("max_pending")");
}

// Whether clients may place tasks on workers themselves (docs/protocol.md §6 T1 "Direct
// placement"): said only when they may not.
TEST(ProtocolMemberCodec, MasterDirect) {
    member_info m;
    m.id = "a";
    m.epoch = 2;
    EXPECT_EQ(encode(m), R"({"v":1,"id":"a","epoch":2,"host":"","pid":0})");
    EXPECT_TRUE(decode_master(encode(m)).value().direct);  // an older master's node too
    m.direct = false;
    EXPECT_EQ(encode(m), R"({"v":1,"id":"a","epoch":2,"host":"","pid":0,"direct":false})");
    EXPECT_EQ(decode_master(encode(m)).value(), m);
    EXPECT_TRUE(decode_master(R"({"v":1,"id":"a","epoch":2,"direct":true})").value().direct);
    const auto dm = [](std::string_view s) { return decode_master(s); };
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"direct":0})", R"("direct")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"direct":"no"})", R"("direct")");
}

// The workers a master found leaving assignments unstarted (docs/protocol.md §7 "Stalled
// workers"): said only when there are some; clients placing directly skip them.
TEST(ProtocolMemberCodec, MasterSuspects) {
    member_info m;
    m.id = "a";
    m.epoch = 2;
    m.suspects = {"w-1", "w-2"};
    EXPECT_EQ(
        encode(m), R"({"v":1,"id":"a","epoch":2,"host":"","pid":0,"suspects":["w-1","w-2"]})"
    );
    EXPECT_EQ(decode_master(encode(m)).value(), m);
    EXPECT_EQ(
        decode_master(R"({"v":1,"id":"a","epoch":2,"suspects":["z","a","z"]})").value().suspects,
        (std::vector<std::string>{"a", "z"})
    );
    const auto dm = [](std::string_view s) { return decode_master(s); };
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"suspects":"w-1"})", R"("suspects")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"suspects":[""]})", R"("suspects")");
    expect_refused(dm, R"({"v":1,"id":"a","epoch":2,"suspects":[7]})", R"("suspects")");
    std::string many = R"({"v":1,"id":"a","epoch":2,"suspects":[)";
    for (std::size_t i = 0; i <= max_suspects_named; ++i) {
        many += (i == 0 ? "\"w" : ",\"w") + std::to_string(i) + "\"";
    }
    expect_refused(dm, many + "]}", R"("suspects")");
    // Past the most named, the rest are left out (so that the node decodes).
    m.suspects.clear();
    for (std::size_t i = 0; i <= max_suspects_named; ++i) {
        m.suspects.push_back("w" + std::to_string(i));
    }
    EXPECT_EQ(decode_master(encode(m)).value().suspects.size(), max_suspects_named);
}

TEST(ProtocolMemberCodec, WorkerTypes) {
    const auto d = [](std::string_view s) { return decode_worker(s); };
    const auto sorted = decode_worker(R"({"v":1,"id":"a","capacity":2,"types":["z","a","z"]})");
    ASSERT_TRUE(sorted) << sorted.error().message;
    EXPECT_EQ(sorted->types, (std::vector<std::string>{"a", "z"}));
    const auto none = decode_worker(R"({"v":1,"id":"a","capacity":0,"types":[]})");
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_TRUE(none->types.empty());
    expect_refused(d, R"({"v":1,"id":"a","capacity":2})", R"("types" is missing)");
    expect_refused(d, R"({"v":1,"id":"a","capacity":2,"types":"sum"})", "must be an array");
    expect_refused(d, R"({"v":1,"id":"a","capacity":2,"types":["ok",3]})", "invalid task type");
    expect_refused(d, R"({"v":1,"id":"a","capacity":2,"types":["a b"]})", "invalid task type");
    expect_refused(d, R"({"v":1,"id":"a","capacity":-1,"types":[]})", R"("capacity")");
    expect_refused(d, R"({"v":1,"capacity":1,"types":[]})", R"("id" is missing)");
    expect_refused(d, R"({"v":1,"id":"","capacity":1,"types":[]})", R"("id" is empty)");
    expect_refused(
        [](std::string_view s) { return decode_master(s); }, R"({"v":1,"id":"a","epoch":0})",
        R"("epoch")"
    );
}

TEST(ProtocolMetaCodec, RoundTripAndLimits) {
    const meta_info m{16, 32, 1763733600000};
    EXPECT_EQ(
        encode(m), R"({"v":3,"pending_shards":16,"result_shards":32,"created_ms":1763733600000})"
    );
    EXPECT_EQ(decode_meta(encode(m)).value(), m);
    const auto d = [](std::string_view s) { return decode_meta(s); };
    expect_refused(d, R"({"v":3,"result_shards":16})", R"("pending_shards" is missing)");
    expect_refused(d, R"({"v":3,"pending_shards":0,"result_shards":16})", R"("pending_shards")");
    expect_refused(d, R"({"v":3,"pending_shards":16,"result_shards":5000})", R"("result_shards")");
    expect_refused(d, R"({"v":3,"pending_shards":-16,"result_shards":1})", R"("pending_shards")");
    EXPECT_TRUE(decode_meta(R"({"v":3,"pending_shards":1,"result_shards":4096})"));
}

TEST(ProtocolMetaCodec, ANamespaceOfAnOlderFormatIsRefusedSayingSo) {
    const auto d = [](std::string_view s) { return decode_meta(s); };
    // Namespaces older zkd made: without change logs (1) this zkd would never see their
    // tasks; with results in shards (2) their clients would never see this zkd's results.
    expect_refused(d, R"({"v":1,"pending_shards":16,"result_shards":16})", "zkd protocol format 1");
    expect_refused(d, R"({"v":2,"pending_shards":16,"result_shards":16})", "zkd protocol format 2");
    expect_refused(d, R"({"v":4,"pending_shards":16,"result_shards":16})", "version 4");
}

TEST(ProtocolChangeLogCodec, RoundTripAndRefusals) {
    const change_log log{
        {{"t5-1763733600123-3fa9c2d100002a", R"({"v":1,"type":"echo"})"},
         {"t5-1763733600123-3fa9c2d100002a.cancel", std::nullopt}}};
    EXPECT_EQ(
        encode(log),
        R"({"v":1,"created":[{"name":"t5-1763733600123-3fa9c2d100002a","data":"{\"v\":1,\"type\":\"echo\"}"},)"
        R"({"name":"t5-1763733600123-3fa9c2d100002a.cancel"}]})"
    );
    EXPECT_EQ(decode_change_log(encode(log)).value(), log);
    EXPECT_TRUE(decode_change_log(R"({"v":1,"created":[]})"));
    const auto d = [](std::string_view s) { return decode_change_log(s); };
    expect_refused(d, "", "not JSON");
    expect_refused(d, R"({"v":1})", R"("created")");
    expect_refused(d, R"({"v":1,"created":[{"name":""}]})", "not a child name");
    expect_refused(d, R"({"v":1,"created":[{"name":"a/b"}]})", "not a child name");
    expect_refused(d, R"({"v":1,"created":[{"name":7}]})", "without a");
    expect_refused(d, R"({"v":1,"created":[{"name":"a","data":{}}]})", R"("data")");
    std::string many = R"({"v":1,"created":[)";
    for (std::size_t i = 0; i <= max_log_entries; ++i) {
        many += (i == 0 ? "" : ",") + std::string(R"({"name":"a"})");
    }
    expect_refused(d, many + "]}", "more than 1000 entries");
}

TEST(ProtocolEpochCodec, RoundTrip) {
    const epoch_info e{"host-1234-9f0c1a2b", 1763733600000};
    EXPECT_EQ(encode(e), R"({"v":1,"master":"host-1234-9f0c1a2b","since_ms":1763733600000})");
    EXPECT_EQ(decode_epoch(encode(e)).value(), e);
    EXPECT_EQ(encode(epoch_info{}), R"({"v":1})");  // before any master
    EXPECT_EQ(decode_epoch(R"({"v":1})").value(), epoch_info{});
    EXPECT_FALSE(decode_epoch(""));
    EXPECT_FALSE(decode_epoch(R"({"v":1,"master":1})"));
}

TEST(ProtocolCancelCodec, RoundTrip) {
    const cancel_info c{1763733600000};
    EXPECT_EQ(encode(c), R"({"v":1,"requested_ms":1763733600000})");
    EXPECT_EQ(decode_cancel(encode(c)).value(), c);
    EXPECT_FALSE(decode_cancel(R"({"v":3,"requested_ms":1})"));
}

// --- any input -------------------------------------------------------------------------------

// Runs every decoder on `data`. None may throw or crash; whatever one accepts must survive a
// re-encode unchanged (so nothing accepted is half-understood).
void decode_everything(std::string_view data) {
    EXPECT_NO_THROW({
        if (auto t = decode_task_node(data)) {
            EXPECT_TRUE(validate(*t));
            EXPECT_EQ(decode_task_node(encode(*t)).value(), *t) << data;
        }
        if (auto r = decode_result(data)) {
            EXPECT_TRUE(validate(*r));
            EXPECT_EQ(decode_result(encode(*r)).value(), *r) << data;
        }
        if (auto m = decode_member(data)) {
            EXPECT_EQ(decode_member(encode(*m)).value(), *m) << data;
        }
        if (auto w = decode_worker(data)) {
            EXPECT_EQ(decode_worker(encode(*w)).value(), *w) << data;
        }
        if (auto m = decode_master(data)) {
            EXPECT_EQ(decode_master(encode(*m)).value(), *m) << data;
        }
        if (auto m = decode_meta(data)) {
            EXPECT_EQ(decode_meta(encode(*m)).value(), *m) << data;
        }
        if (auto e = decode_epoch(data)) {
            EXPECT_EQ(decode_epoch(encode(*e)).value(), *e) << data;
        }
        if (auto c = decode_cancel(data)) {
            EXPECT_EQ(decode_cancel(encode(*c)).value(), *c) << data;
        }
    }) << data;
}

TEST(ProtocolCodecFuzz, AdversarialInputs) {
    const std::vector<std::string> inputs{
        "",
        " ",
        "null",
        "true",
        "0",
        "-0",
        "1e999",
        "{}",
        "[]",
        "\"\"",
        "{\"v\":1}",
        std::string(100000, '['),
        std::string(100000, '{'),
        std::string(50000, '[') + "1" + std::string(50000, ']'),
        R"({"v":1,"args":)" + std::string(63, '[') + std::string(63, ']') + "}",
        R"({"v":1,"type":"t","args":123456789012345678901234567890})",
        R"({"v":1,"type":"t","args":-123456789012345678901234567890})",
        R"({"v":1,"type":"t","priority":9223372036854775808})",
        R"({"v":1,"type":"t","priority":-9223372036854775809})",
        R"({"v":1,"type":"t","timeout_ms":9223372036854775807})",
        R"({"v":1,"type":"t","timeout_ms":-9223372036854775808})",
        R"({"v":1,"type":"t","submitted_ms":9007199254740993.0})",
        R"({"v":1e-400,"type":"t"})",
        R"({"v":-0.0,"type":"t"})",
        R"({"v":1,"v":2})",
        R"({"v":1,"type":"t","type":"u"})",
        R"({"v":[1],"type":"t"})",
        R"({"v":{},"type":"t"})",
        R"({"v":true})",
        R"({"v":1,"id":"a","capacity":2147483648,"types":[]})",
        R"({"v":1,"id":"a","capacity":2,"types":[[],{}]})",
        R"({"v":1,"task":"t","state":"failed","error":{"code":"x","message":[]}})",
        R"({"v":1,"task":"t","state":"succeeded","value":)" + std::string(62, '[') +
            std::string(62, ']') + "}",
        R"({"v":1,"pending_shards":1.5,"result_shards":1})",
        R"({"v":1,"pending_shards":4294967296,"result_shards":1})",
        R"({"v":1,"type":"t","\u0000":1})",
        R"({"v":1,"type":"\ud800"})",
        "\xef\xbb\xbf{\"v\":1}",
        std::string("{\"v\":1}\0", 8),
        "/* c */{\"v\":1}",
        "{\"v\":1,}",
    };
    for (const auto& in : inputs)
        decode_everything(in);
}

TEST(ProtocolCodecFuzz, RandomAndMutatedInputs) {
    std::mt19937 rng(20240601);
    auto pick = [&](std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };

    std::vector<std::string> seeds;
    seeds.push_back(encode(example_task()));
    auto running = assigned_task();
    running.run.running_ms = 1;
    seeds.push_back(encode(running));
    task_result ok;
    ok.task = "t4-1763733600123-3fa9c2d100002a";
    ok.value = json::parse(R"({"sum":6,"list":[1.5,-2,"x",null,true]})");
    ok.attempt = 2;
    ok.worker = "w";
    seeds.push_back(encode(ok));
    task_result failed = ok;
    failed.state = task_state::timed_out;
    failed.error = task_error{std::string(codes::timeout), "too slow"};
    seeds.push_back(encode(failed));
    member_info w{"h-1-00000000", "h",          1, 4,    {"a", "b"}, 5,     std::nullopt,  0, true,
                  std::nullopt,   std::nullopt, 2, true, {},         {"b"}, own_features()};
    seeds.push_back(encode(w));
    member_info m{"h-1-00000000", "h",  1,    std::nullopt, {},    0,       3,  9,
                  false,          12.5, 1000, std::nullopt, false, {"w-1"}, {}, own_features()};
    seeds.push_back(encode(m));
    seeds.push_back(encode(meta_info{16, 16, 1}));
    seeds.push_back(encode(epoch_info{"m", 2}));
    seeds.push_back(encode(cancel_info{3}));

    static constexpr std::string_view tokens[] = {
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        "null",
        "true",
        "false",
        "0",
        "-1",
        "1e400",
        "18446744073709551616",
        "-9223372036854775809",
        "1.5",
        "\"v\"",
        "\"type\"",
        "\"args\"",
        "\"state\"",
        "\"error\"",
        "\"types\"",
        "\"capacity\"",
        "\"threads\"",
        "\"epoch\"",
        "\\u0000",
        "\xff",
        "\xc3\xa9",
        "\"succeeded\"",
        "\"failed\"",
        "2",
        "{\"a\":[[[[1]]]]}"};

    int accepted = 0;
    constexpr int iterations = 6000;
    for (int i = 0; i < iterations; ++i) {
        std::string s;
        if (i % 10 == 0) {
            // Pure noise.
            s.resize(pick(200));
            for (auto& c : s)
                c = static_cast<char>(pick(256));
        } else {
            s = seeds[pick(seeds.size())];
            const auto edits = 1 + pick(4);
            for (std::size_t e = 0; e < edits; ++e) {
                const auto at = s.empty() ? 0 : pick(s.size() + 1);
                switch (pick(5)) {
                case 0:  // flip a byte
                    if (!s.empty())
                        s[std::min(at, s.size() - 1)] = static_cast<char>(pick(256));
                    break;
                case 1:  // insert a token
                    s.insert(at, tokens[pick(std::size(tokens))]);
                    break;
                case 2:  // delete a range
                    s.erase(at, pick(8));
                    break;
                case 3:  // duplicate a range
                    s.insert(at, s.substr(pick(s.size() + 1), pick(16)));
                    break;
                default: {  // replace a token with another
                    const auto tok = tokens[pick(std::size(tokens))];
                    s.replace(at, tok.size(), tokens[pick(std::size(tokens))]);
                    break;
                }
                }
            }
        }
        decode_everything(s);
        if (decode_task_node(s) || decode_result(s) || decode_member(s))
            ++accepted;
        if (HasFailure())
            break;
    }
    // Mutations leave a fair share of inputs valid, so the accepting paths get exercised too.
    EXPECT_GT(accepted, iterations / 20);
}

}  // namespace

TEST(ProtocolTaskNode, TheBundleMustHoldAsManyTasksAsItsIdSays) {
    const std::string plain = "t4-1763733600123-3fa9c2d100002a";
    auto bundle = example_task();
    bundle.args = nullptr;
    bundle.bundle = {json::value(1), json::value(2), json::value(3)};
    EXPECT_TRUE(decode_task_node(plain + "_3", encode(bundle)));
    expect_refused(
        [&](std::string_view d) { return decode_task_node(plain + "_4", d); }, encode(bundle),
        "where its id says 4"
    );
    expect_refused(
        [&](std::string_view d) { return decode_task_node(plain, d); }, encode(bundle),
        "where its id says 0"
    );
    // A bundle id whose node holds a plain task (no array): refused too.
    expect_refused(
        [&](std::string_view d) { return decode_task_node(plain + "_2", d); },
        encode(example_task()), "a bundle of 0 tasks"
    );
    EXPECT_TRUE(decode_task_node(plain, encode(example_task())));
}

// Numbers with a fraction as JSON users write them (Boost.JSON alone writes 0.4 as 4E-1);
// everything else exactly as Boost.JSON writes it.
TEST(ProtocolJsonText, NumbersWithAFractionAreWrittenPlainly) {
    EXPECT_EQ(to_text(json::value(0.4)), "0.4");
    EXPECT_EQ(to_text(json::value(12.5)), "12.5");
    EXPECT_EQ(to_text(json::value(3.0)), "3.0");
    EXPECT_EQ(to_text(json::value(-0.0)), "-0.0");
    EXPECT_EQ(to_text(json::value(1e21)), "1e+21");
    EXPECT_EQ(to_text(json::value(1.5e-7)), "1.5e-07");
    EXPECT_EQ(to_text(json::value(0.1 + 0.2)), "0.30000000000000004");
    const auto doc =
        json::parse(R"({"a":[1,-2,0.25,"x\"\n\u0001"],"b":{"c":true,"d":null,"e":1.5}})");
    EXPECT_EQ(to_text(doc), R"({"a":[1,-2,0.25,"x\"\n\u0001"],"b":{"c":true,"d":null,"e":1.5}})");
    EXPECT_EQ(to_text(doc.as_object()), to_text(doc));
    // Read back: the same values, doubles still doubles.
    EXPECT_EQ(json::parse(to_text(doc)), doc);
    EXPECT_TRUE(json::parse(to_text(json::value(3.0))).is_double());
    const json::value plain{{"k", 1}, {"s", "v"}};
    EXPECT_EQ(to_text(plain), json::serialize(plain));
    // What zkd writes: a result's value.
    task_result r;
    r.task = "t";
    r.state = task_state::succeeded;
    r.value = 0.4;
    EXPECT_NE(encode(r).find(R"("value":0.4)"), std::string::npos) << encode(r);
}

}  // namespace ZKD_UNITY_ID
