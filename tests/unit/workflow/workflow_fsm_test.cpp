// SPDX-License-Identifier: MIT
// workflow_fsm event by event, no server (docs/protocol.md §11.4): launches written with the
// state, inputs, fan-in exactly once across a failover, map steps, failures, cancel, reaping.
#include "workflow/workflow_fsm.hpp"

#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "workflow/txn.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::workflow;
namespace json = boost::json;
using zkd::protocol::task_result;
using zkd::protocol::task_state;

namespace {

constexpr workflow_ref ref{1'700'000'000'000, 0xabcdef01};

std::shared_ptr<const workflow_spec> spec_of(std::string_view text) {
    auto s = parse_spec(text);
    EXPECT_TRUE(s) << s.error().message;
    return std::make_shared<const workflow_spec>(std::move(*s));
}

read_result succeeded(std::string tid, json::value v) {
    task_result r;
    r.task = std::move(tid);
    r.state = task_state::succeeded;
    r.value = std::move(v);
    return r;
}

read_result failed(std::string tid, std::string code = "handler_error") {
    task_result r;
    r.task = std::move(tid);
    r.state = task_state::failed;
    r.error = zkd::protocol::task_error{std::move(code), "it broke"};
    return r;
}

/// One workflow_fsm and the clock.
struct flow {
    explicit flow(std::string_view text, workflow_fsm::options o = {})
        : spec(spec_of(text)), fsm(ref, spec, o) {}

    workflow_step on(const workflow_event& e) { return fsm.on(e, now); }
    workflow_step load(
        std::optional<workflow_state> s = std::nullopt,
        std::int32_t version = -1,
        std::vector<std::pair<std::string, read_result>> results = {},
        bool cancel = false
    ) {
        return on(wf_saw::loaded{std::move(s), version, cancel, std::move(results)});
    }
    /// The result of step `name` (element `element` of a map) landed.
    workflow_step land(std::string_view name, read_result r) {
        return on(wf_saw::result{tid(name), std::move(r)});
    }
    std::string tid(std::string_view name, std::uint64_t element = 0) const {
        return fsm.task_id(*spec->index_of(name), element);
    }
    workflow_step commit() { return on(wf_saw::written{true}); }

    std::shared_ptr<const workflow_spec> spec;
    workflow_fsm fsm;
    std::int64_t now = 1'700'000'001'000;
};

const wf_do::write& the_write(const workflow_step& s) {
    const wf_do::write* w = nullptr;
    for (const auto& a : s.actions) {
        if (const auto* x = std::get_if<wf_do::write>(&a)) {
            EXPECT_EQ(w, nullptr) << "two writes";
            w = x;
        }
    }
    static const wf_do::write none;
    EXPECT_NE(w, nullptr) << "no write";
    return w != nullptr ? *w : none;
}

bool has_write(const workflow_step& s) {
    return std::ranges::any_of(s.actions, [](const workflow_action& a) {
        return std::holds_alternative<wf_do::write>(a);
    });
}

template <class A>
const A* find_action(const workflow_step& s) {
    for (const auto& a : s.actions) {
        if (const auto* x = std::get_if<A>(&a)) {
            return x;
        }
    }
    return nullptr;
}

std::vector<std::string> tids(const wf_do::write& w) {
    std::vector<std::string> out;
    for (const auto& c : w.creates) {
        out.push_back(c.tid);
    }
    return out;
}

zkd::protocol::task_spec task_of(const task_create& c) {
    auto t = zkd::protocol::decode_task_node(c.tid, c.data);
    EXPECT_TRUE(t) << c.data;
    return t ? t->task : zkd::protocol::task_spec{};
}

workflow_state state_of(const wf_do::write& w, std::size_t steps) {
    auto s = decode_state(w.state, steps);
    EXPECT_TRUE(s) << w.state;
    return s ? *s : workflow_state{};
}

constexpr std::string_view chain3 = R"({"steps":{
    "a":{"type":"echo","args":{"x":1}},
    "b":{"type":"echo","args":{"y":2},"after":["a"]},
    "c":{"type":"echo","args":{},"after":["b"]}}})";

TEST(WorkflowFsm, AChainPassesValuesAndEnds) {
    flow f(chain3);
    auto s = f.load();
    const auto& w = the_write(s);
    EXPECT_FALSE(w.version);  // creates the state node
    ASSERT_EQ(tids(w), std::vector<std::string>{f.tid("a")});
    const auto ta = task_of(w.creates[0]);
    EXPECT_EQ(ta.type, "echo");
    EXPECT_EQ(ta.client, "abcdef01");               // the workflow is the client: /results/abcdef01
    EXPECT_EQ(ta.args, json::parse(R"({"x":1})"));  // no inputs for a step that waits for none
    EXPECT_EQ(state_of(w, 3).steps, "r--");
    EXPECT_TRUE(f.commit().actions.empty());

    const auto sb = f.land("a", succeeded(f.tid("a"), json::parse(R"({"x":1})")));
    const auto& wb = the_write(sb);
    EXPECT_EQ(wb.version, 0);
    ASSERT_EQ(tids(wb), std::vector<std::string>{f.tid("b")});
    EXPECT_EQ(task_of(wb.creates[0]).args, json::parse(R"({"y":2,"inputs":{"a":{"x":1}}})"));
    EXPECT_EQ(state_of(wb, 3).steps, "sr-");
    f.commit();

    const auto sc = f.land("b", succeeded(f.tid("b"), json::value(7)));
    EXPECT_EQ(task_of(the_write(sc).creates[0]).args, json::parse(R"({"inputs":{"b":7}})"));
    f.commit();

    f.now += 10;
    const auto end = f.land("c", succeeded(f.tid("c"), json::value("done")));
    const auto& we = the_write(end);
    EXPECT_TRUE(we.creates.empty());
    const auto final_state = state_of(we, 3);
    EXPECT_EQ(final_state.status, workflow_status::succeeded);
    EXPECT_EQ(final_state.steps, "sss");
    EXPECT_EQ(final_state.finished_ms, f.now);
    const auto done = f.commit();
    const auto* fin = find_action<wf_do::finished>(done);
    ASSERT_NE(fin, nullptr);
    EXPECT_EQ(fin->status, workflow_status::succeeded);
    EXPECT_EQ(done.wake_at_ms, f.now + 24LL * 3600 * 1000);
    EXPECT_EQ(f.fsm.result(), json::parse(R"({"c":"done"})"));
    const auto v = f.fsm.view();
    EXPECT_EQ(v[1].status, step_status::succeeded);
    EXPECT_EQ(v[1].value, json::value(7));
}

TEST(WorkflowFsm, ResultsOfOtherTasksAndRepeatsChangeNothing) {
    flow f(chain3);
    f.load();
    f.commit();
    EXPECT_TRUE(
        f.on(wf_saw::result{"t4-1700000000000-00000000000000", succeeded("x", 1)}).actions.empty()
    );
    EXPECT_TRUE(f.on(wf_saw::result{"garbage", succeeded("x", 1)}).actions.empty());
    auto s = f.land("a", succeeded(f.tid("a"), 1));
    EXPECT_EQ(tids(the_write(s)).size(), 1U);
    f.commit();
    EXPECT_FALSE(has_write(f.land("a", succeeded(f.tid("a"), 1))));
}

constexpr std::string_view chord = R"({"steps":{
    "a":{"type":"echo","args":1},"b":{"type":"echo","args":2},"c":{"type":"echo","args":3},
    "join":{"type":"sum","args":{},"after":["a","b","c"]}}})";

TEST(WorkflowFsm, AChordJoinsOnceAllLanded) {
    flow f(chord);
    const auto first = f.load();
    EXPECT_EQ(the_write(first).creates.size(), 3U);
    f.commit();
    EXPECT_FALSE(has_write(f.land("b", succeeded(f.tid("b"), 2))));
    EXPECT_FALSE(has_write(f.land("a", succeeded(f.tid("a"), 1))));
    const auto s = f.land("c", succeeded(f.tid("c"), 3));
    const auto& w = the_write(s);
    ASSERT_EQ(tids(w), std::vector<std::string>{f.tid("join")});
    EXPECT_EQ(task_of(w.creates[0]).args, json::parse(R"({"inputs":{"a":1,"b":2,"c":3}})"));
}

TEST(WorkflowFsm, FanInRunsOnceAcrossAFailover) {
    // The master that launched the join died; its write applied (the state says so).
    flow launched(chord);
    launched.load();
    launched.commit();
    launched.land("a", succeeded(launched.tid("a"), 1));
    launched.land("b", succeeded(launched.tid("b"), 2));
    const auto s = launched.land("c", succeeded(launched.tid("c"), 3));
    const auto written = state_of(the_write(s), 4);
    const auto join_tid = the_write(s).creates.at(0).tid;

    std::vector<std::pair<std::string, read_result>> results = {
        {launched.tid("a"), succeeded(launched.tid("a"), 1)},
        {launched.tid("b"), succeeded(launched.tid("b"), 2)},
        {launched.tid("c"), succeeded(launched.tid("c"), 3)},
    };
    flow next(chord);
    EXPECT_FALSE(has_write(next.load(written, 2, results)));  // nothing launched again

    // Its write did not apply: the next master launches the same task, once.
    auto before = written;
    before.steps = "rrr-";
    flow redo(chord);
    const auto again = redo.load(before, 1, results);
    ASSERT_EQ(tids(the_write(again)), std::vector<std::string>{join_tid});
    EXPECT_EQ(the_write(again).version, 1);
}

TEST(WorkflowFsm, AFailedWriteReloadsAndLaunchesNothingTwice) {
    flow f(chain3);
    f.load();
    const auto r = f.on(wf_saw::written{false});
    ASSERT_EQ(r.actions.size(), 1U);
    EXPECT_TRUE(std::holds_alternative<wf_do::reload>(r.actions[0]));
    // Results that come while reloading wait for the load.
    EXPECT_TRUE(f.land("a", succeeded(f.tid("a"), 1)).actions.empty());
    // The write had applied after all: version 0, a launched.
    workflow_state s;
    s.steps = "r--";
    s.next = 3;
    const auto after = f.load(s, 0, {{f.tid("a"), succeeded(f.tid("a"), 1)}});
    EXPECT_EQ(tids(the_write(after)), std::vector<std::string>{f.tid("b")});
}

TEST(WorkflowFsm, AFailureSkipsDependantsAndFailsTheWorkflow) {
    flow f(R"({"steps":{"a":{"type":"fail"},"b":{"type":"echo","after":["a"]},
        "c":{"type":"echo","after":["b"]},"other":{"type":"sleep","args":1}}})");
    f.load();
    f.commit();
    const auto s = f.land("a", failed(f.tid("a")));
    // "other" still runs: the workflow ends once nothing runs.
    EXPECT_FALSE(has_write(s));
    const auto v = f.fsm.view();
    EXPECT_EQ(v[*f.spec->index_of("b")].status, step_status::skipped);
    EXPECT_EQ(v[*f.spec->index_of("c")].status, step_status::skipped);
    EXPECT_EQ(v[*f.spec->index_of("a")].error->code, "handler_error");
    const auto end = f.land("other", succeeded(f.tid("other"), 1));
    const auto st = state_of(the_write(end), 4);
    EXPECT_EQ(st.status, workflow_status::failed);
    EXPECT_EQ(st.steps, "fkks");
}

TEST(WorkflowFsm, ContinueOnFailurePassesNull) {
    flow f(R"({"steps":{"a":{"type":"fail","continue_on_failure":true},
        "b":{"type":"echo","args":{},"after":["a"]}}})");
    f.load();
    f.commit();
    const auto s = f.land("a", failed(f.tid("a")));
    EXPECT_EQ(task_of(the_write(s).creates.at(0)).args, json::parse(R"({"inputs":{"a":null}})"));
    f.commit();
    const auto end = f.land("b", succeeded(f.tid("b"), 5));
    EXPECT_EQ(state_of(the_write(end), 2).status, workflow_status::succeeded);
}

TEST(WorkflowFsm, AGarbageResultFailsItsStep) {
    flow f(chain3);
    f.load();
    f.commit();
    f.on(wf_saw::result{f.tid("a"), zkd::protocol::decode_error{"not JSON"}});
    const auto v = f.fsm.view();
    EXPECT_EQ(v[0].status, step_status::failed);
    EXPECT_EQ(v[0].error->code, "malformed_result");
}

constexpr std::string_view mapped = R"({"steps":{
    "list":{"type":"echo","args":[10,20,30]},
    "each":{"type":"sum","map":"list"},
    "each2":{"type":"echo","map":"list","args":{"k":1}},
    "total":{"type":"sum","args":{},"after":["each"]}}})";

TEST(WorkflowFsm, AMapFansOutAndCollects) {
    flow f(mapped);
    f.load();
    f.commit();
    const auto s = f.land("list", succeeded(f.tid("list"), json::parse("[10,20,30]")));
    const auto& w = the_write(s);
    ASSERT_EQ(w.creates.size(), 6U);
    const auto st = state_of(w, 4);
    ASSERT_EQ(st.maps.size(), 2U);
    EXPECT_EQ(st.next, 4U + 6U);
    std::set<std::string> ids;
    for (const auto& c : w.creates) {
        EXPECT_TRUE(ids.insert(c.tid).second);
    }
    // each: the element as args; each2: its args with the element and its index.
    const auto each = *f.spec->index_of("each");
    const auto each2 = *f.spec->index_of("each2");
    EXPECT_EQ(task_of(w.creates[1]).args, json::value(20));
    EXPECT_EQ(task_of(w.creates[4]).args, json::parse(R"({"k":1,"item":20,"index":1})"));
    const auto created = tids(w);
    f.commit();
    EXPECT_EQ(created[0], f.fsm.task_id(each, 0));
    EXPECT_EQ(created[5], f.fsm.task_id(each2, 2));
    for (std::uint64_t i = 0; i < 3; ++i) {
        EXPECT_FALSE(has_write(f.on(wf_saw::result{
            f.fsm.task_id(each2, i), succeeded("", json::value(i))})));
    }
    EXPECT_FALSE(has_write(f.on(wf_saw::result{f.fsm.task_id(each, 2), succeeded("", 30)})));
    EXPECT_FALSE(has_write(f.on(wf_saw::result{f.fsm.task_id(each, 0), succeeded("", 10)})));
    const auto last = f.on(wf_saw::result{f.fsm.task_id(each, 1), succeeded("", 20)});
    const auto& wt = the_write(last);
    ASSERT_EQ(wt.creates.size(), 1U);
    EXPECT_EQ(task_of(wt.creates[0]).args, json::parse(R"({"inputs":{"each":[10,20,30]}})"));
}

TEST(WorkflowFsm, AMapOverNoArrayFailsAndAnEmptyOneSucceeds) {
    flow f(mapped);
    f.load();
    f.commit();
    const auto s = f.land("list", succeeded(f.tid("list"), json::value(3)));
    const auto st = state_of(the_write(s), 4);
    EXPECT_EQ(st.errors.at("each").code, "bad_map_input");
    EXPECT_EQ(
        st.errors.at("each").message, "step \"list\" returned a number, not an array to map over"
    );
    EXPECT_EQ(st.status, workflow_status::failed);  // nothing else can run

    flow g(mapped);
    g.load();
    g.commit();
    const auto e = g.land("list", succeeded(g.tid("list"), json::array{}));
    const auto& we = the_write(e);
    ASSERT_EQ(we.creates.size(), 1U);  // total, with an empty array
    EXPECT_EQ(task_of(we.creates[0]).args, json::parse(R"({"inputs":{"each":[]}})"));
}

TEST(WorkflowFsm, ALargeFanOutGoesInSeveralWrites) {
    std::string text =
        R"({"steps":{"src":{"type":"echo"},"join":{"type":"echo","args":{},"after":[)";
    for (int i = 0; i < 1000; ++i) {
        text += (i ? ",\"" : "\"") + std::string("w") + std::to_string(i) + "\"";
    }
    text += "]}";
    for (int i = 0; i < 1000; ++i) {
        text += ",\"w" + std::to_string(i) + R"(":{"type":"echo","args":)" + std::to_string(i) +
                R"(,"after":["src"]})";
    }
    text += "}}";
    workflow_fsm::options o;
    o.max_creates_per_write = 300;
    flow f(text, o);
    f.load();
    f.commit();
    std::set<std::string> launched;
    auto s = f.land("src", succeeded(f.tid("src"), 0));
    for (int round = 0; round < 4; ++round) {
        const auto& w = the_write(s);
        EXPECT_LE(w.creates.size(), 300U);
        for (const auto& c : w.creates) {
            EXPECT_TRUE(launched.insert(c.tid).second);
        }
        s = f.commit();
    }
    EXPECT_EQ(launched.size(), 1000U);
    EXPECT_FALSE(has_write(s));
    for (int i = 0; i < 999; ++i) {
        EXPECT_FALSE(has_write(f.land("w" + std::to_string(i), succeeded("", i))));
    }
    const auto j = f.land("w999", succeeded("", 999));
    ASSERT_EQ(the_write(j).creates.size(), 1U);
    EXPECT_EQ(task_of(the_write(j).creates[0]).args.at("inputs").as_object().size(), 1000U);
}

TEST(WorkflowFsm, CancelStopsWhatWaitsAndCancelsWhatRuns) {
    flow f(chord);
    f.load();
    f.commit();
    f.land("a", succeeded(f.tid("a"), 1));
    const auto s = f.on(wf_saw::cancel{});
    const auto st = state_of(the_write(s), 4);
    EXPECT_EQ(st.status, workflow_status::cancelled);
    EXPECT_EQ(st.steps, "srrc");  // b and c ran when cancelled; join never started
    EXPECT_TRUE(the_write(s).creates.empty());
    const auto done = f.commit();
    const auto* c = find_action<wf_do::cancel_tasks>(done);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->tids, (std::vector<std::string>{f.tid("b"), f.tid("c")}));
    EXPECT_NE(find_action<wf_do::finished>(done), nullptr);
    EXPECT_FALSE(has_write(f.land("b", succeeded(f.tid("b"), 2))));

    // A master taking over asks again for what has not ended.
    flow g(chord);
    const auto again = g.load(
        st, 1, {{f.tid("a"), succeeded(f.tid("a"), 1)}, {f.tid("b"), succeeded(f.tid("b"), 2)}}
    );
    const auto* c2 = find_action<wf_do::cancel_tasks>(again);
    ASSERT_NE(c2, nullptr);
    EXPECT_EQ(c2->tids, std::vector<std::string>{f.tid("c")});
    EXPECT_EQ(g.fsm.view()[3].status, step_status::cancelled);
}

TEST(WorkflowFsm, ACancelRequestFoundAtLoadCancels) {
    flow f(chain3);
    const auto s = f.load(std::nullopt, -1, {}, true);
    const auto st = state_of(the_write(s), 3);
    EXPECT_EQ(st.status, workflow_status::cancelled);
    EXPECT_EQ(st.steps, "ccc");
    EXPECT_TRUE(the_write(s).creates.empty());
}

/// Step "s<i>": an echo of {"n": 1000000 + i}, every one of the same size.
std::string step_json(int i) {
    return "\"s" + std::to_string(i) + R"(":{"type":"echo","args":{"n":)" +
           std::to_string(1'000'000 + i) + "}}";
}

/// A W2 of the fan-out in `f`'s next write, its tasks placed on workers as `workers` of the
/// longest valid member ids, in turn, each stamped as the engine stamps it.
std::vector<zkd::protocol::txn_op> placed_launch(const wf_do::write& w, std::size_t workers) {
    std::vector<std::optional<direct_target>> placed(w.creates.size());
    for (std::size_t i = 0; i < w.creates.size(); ++i) {
        // The longest id is_valid_member_id accepts: 253 host characters, a 19-digit pid.
        auto worker = std::string(zkd::protocol::max_member_host_length, 'h') + "-" +
                      std::string(19, '9') + "-" + std::string(6, 'a') +
                      std::to_string(10 + (i % workers));
        EXPECT_TRUE(zkd::protocol::is_valid_member_id(worker)) << worker;
        auto data = zkd::protocol::stamp(
            w.creates[i].data, zkd::protocol::assignment{0, 0, 9'999'999'999'999, worker}
        );
        EXPECT_TRUE(data);
        placed[i] = direct_target{worker, 2'000'000'000, std::move(*data)};
    }
    zkd::protocol::layout l;
    l.pending_shards = 1'000'000;
    return launch_ops(l, workflow_id(ref), 2'000'000'000, w, placed);
}

TEST(WorkflowFsm, AWriteStaysUnderTheLimitWhereverItsTasksGo) {
    // A fan-out of 3,000 tasks of about 900 bytes: more than one W2 holds by its bytes (not
    // by its 900 creates). Each W2 holds as many as its budget lets, counting what placing
    // them on workers adds (the stamps, the /assign paths, the workers' checks and change
    // logs), and its multi stays under the limit with every task placed, as with none.
    const std::string pad(800, 'p');
    flow f(
        R"({"steps":{"src":{"type":"echo"},"m":{"type":"echo","map":"src","args":{"pad":")" + pad +
        R"("}}}})"
    );
    f.load();
    f.commit();
    json::array items;
    for (int i = 0; i < 3000; ++i) {
        items.emplace_back(i);
    }
    auto s = f.land("src", succeeded(f.tid("src"), items));
    const auto id = workflow_id(ref);
    std::size_t launched = 0;
    for (int round = 0; round < 10 && has_write(s); ++round) {
        const auto& w = the_write(s);
        if (w.creates.empty()) {
            break;
        }
        EXPECT_LT(w.creates.size(), 900U) << "the bytes, not the count, end this write";
        const auto bound = launch_bound(id, w.state, w.creates);
        EXPECT_LE(bound, max_launch_bytes);
        for (const std::size_t workers : {std::size_t{1}, max_placement_workers}) {
            const auto ops = placed_launch(w, workers);
            EXPECT_LE(launch_bytes(ops), bound) << workers << " workers";
            EXPECT_LE(launch_bytes(ops), max_launch_bytes) << workers << " workers";
        }
        zkd::protocol::layout l;
        EXPECT_LE(launch_bytes(launch_ops(l, id, 7, w)), bound) << "every task to pending";
        launched += w.creates.size();
        // Full: the next task would not have fitted (within the room the fsm keeps for the
        // state to grow: its status, finished_ms and the map's count).
        s = f.commit();
        if (launched < items.size()) {
            const auto& next = the_write(s).creates.at(0);
            EXPECT_GT(
                bound + launch_create_bytes(next.tid, next.data.size()) + 256, max_launch_bytes
            );
        }
    }
    EXPECT_EQ(launched, items.size());
}

TEST(WorkflowFsm, TheWriteBudgetIsASplitterAtItsBoundary) {
    // With the budget set to what exactly k tasks take, a write holds k (the state's room
    // to grow included); one byte less, k - 1.
    std::string text = R"({"steps":{)";
    for (int i = 10; i < 60; ++i) {
        text += (i > 10 ? "," : "") + step_json(i);
    }
    text += "}}";
    const auto first_write = [&](std::size_t max_bytes) {
        workflow_fsm::options o;
        o.max_write_bytes = max_bytes;
        flow f(text, o);
        return the_write(f.load());
    };
    const auto all = first_write(SIZE_MAX);
    ASSERT_EQ(all.creates.size(), 50U);
    const auto id = workflow_id(ref);
    const auto per_task = launch_create_bytes(all.creates[0].tid, all.creates[0].data.size());
    for (const auto& c : all.creates) {
        ASSERT_EQ(launch_create_bytes(c.tid, c.data.size()), per_task);  // all of one size
    }
    // The fsm's fixed part: the state as it is before this write, with room to grow.
    workflow_state before;
    before.steps = std::string(50, '-');
    before.next = 50;
    before.started_ms = flow(text).now;
    const auto fixed = launch_fixed_bytes(id, encode_state(before).size() + 64);
    for (const std::size_t k : {1U, 2U, 17U, 49U}) {
        const auto exact = first_write(fixed + k * per_task);
        EXPECT_EQ(exact.creates.size(), k);
        EXPECT_LE(launch_bound(id, exact.state, exact.creates), fixed + k * per_task);
        if (k > 1) {
            EXPECT_EQ(first_write(fixed + k * per_task - 1).creates.size(), k - 1);
        }
    }
    // Over the budget alone, a task still goes (one per write).
    EXPECT_EQ(first_write(1).creates.size(), 1U);
}

TEST(WorkflowFsm, ArgsTooLargeWithInputsFailTheStep) {
    flow f(R"({"steps":{"a":{"type":"echo"},"b":{"type":"echo","args":{},"after":["a"]}}})");
    f.load();
    f.commit();
    const auto s =
        f.land("a", succeeded(f.tid("a"), json::value(std::string(std::size_t{600} * 1024, 'x'))));
    const auto st = state_of(the_write(s), 2);
    EXPECT_EQ(st.errors.at("b").code, "bad_inputs");
    EXPECT_NE(st.errors.at("b").message.find("over the 524288 a task may hold"), std::string::npos);
    EXPECT_EQ(st.status, workflow_status::failed);
}

TEST(WorkflowFsm, AFinishedWorkflowIsReapedAfterRetention) {
    workflow_fsm::options o;
    o.retention_ms = 1000;
    flow f(R"({"steps":{"a":{"type":"echo"}}})", o);
    workflow_state s;
    s.status = workflow_status::succeeded;
    s.steps = "s";
    s.next = 1;
    s.finished_ms = f.now - 400;
    const auto first = f.load(s, 3);
    EXPECT_NE(find_action<wf_do::finished>(first), nullptr);
    EXPECT_EQ(first.wake_at_ms, f.now + 600);
    f.now += 600;
    const auto later = f.on(wf_saw::tick{});
    EXPECT_NE(find_action<wf_do::reap>(later), nullptr);
    EXPECT_FALSE(has_write(later));
}

TEST(WorkflowFsm, AWorkflowRunningLongerThanTheRetentionIsNeverReapedWhileItRuns) {
    workflow_fsm::options o;
    o.retention_ms = 1000;
    flow f(R"({"steps":{"a":{"type":"echo"},"b":{"type":"echo","after":["a"]}}})", o);
    // Taken over a day after it started, with a's result from then and b running.
    workflow_state s;
    s.steps = "sr";
    s.next = 2;
    s.started_ms = f.now - 86'400'000;
    const auto first = f.load(s, 5, {{f.tid("a"), succeeded(f.tid("a"), 1)}});
    EXPECT_EQ(find_action<wf_do::reap>(first), nullptr);
    EXPECT_EQ(find_action<wf_do::finished>(first), nullptr);
    EXPECT_EQ(reap_at_ms(f.fsm.state(), o.retention_ms), std::nullopt);
    EXPECT_TRUE(needs_following(f.fsm.state()));
    // Hours of ticks, far past any retention from its start: nothing is reaped.
    for (int hour = 0; hour < 48; ++hour) {
        f.now += 3'600'000;
        const auto t = f.on(wf_saw::tick{});
        EXPECT_EQ(find_action<wf_do::reap>(t), nullptr) << hour;
        EXPECT_FALSE(t.wake_at_ms) << "no reap is scheduled while it runs";
    }
    // b ends: the workflow ends now, and is reaped the retention after that only.
    const auto end = f.land("b", succeeded(f.tid("b"), 2));
    const auto st = state_of(the_write(end), 2);
    EXPECT_EQ(st.status, workflow_status::succeeded);
    EXPECT_EQ(st.finished_ms, f.now);
    const auto done = f.commit();
    EXPECT_EQ(find_action<wf_do::reap>(done), nullptr);
    EXPECT_EQ(done.wake_at_ms, f.now + 1000);
    EXPECT_EQ(reap_at_ms(st, o.retention_ms), f.now + 1000);
    f.now += 999;
    EXPECT_EQ(find_action<wf_do::reap>(f.on(wf_saw::tick{})), nullptr);
    f.now += 1;
    EXPECT_NE(find_action<wf_do::reap>(f.on(wf_saw::tick{})), nullptr);
}

TEST(WorkflowFsm, ATakeoverFollowsOnlyWhatRunsOrHasTasksToStop) {
    workflow_state s;
    s.steps = "sr-";
    EXPECT_TRUE(needs_following(s));  // running
    s.status = workflow_status::succeeded;
    s.steps = "sss";
    s.finished_ms = 5;
    EXPECT_FALSE(needs_following(s));
    EXPECT_EQ(reap_at_ms(s, 10), 15);
    s.status = workflow_status::failed;
    s.steps = "sfk";
    EXPECT_FALSE(needs_following(s));
    s.status = workflow_status::cancelled;
    s.steps = "scc";
    EXPECT_FALSE(needs_following(s));  // nothing ran when it was cancelled
    s.steps = "src";
    EXPECT_TRUE(needs_following(s));  // its task is asked again to stop
}

TEST(WorkflowFsm, TaskIdsAreTheSameForTheSameWorkflow) {
    flow a(mapped);
    flow b(mapped);
    a.load();
    b.load();
    EXPECT_EQ(a.tid("list"), b.tid("list"));
    EXPECT_EQ(a.tid("list"), step_task_id(ref, 5, *a.spec->index_of("list")));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
