// SPDX-License-Identifier: MIT
// zkd-chaos: the jobs invariants (delayed tasks, schedules, workflows) over recorded runs.
#include "chaos/jobs.hpp"

#include "chaos/options.hpp"
#include "schedule/firing.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

namespace ZKD_UNITY_ID {

using namespace zkd::chaos;
namespace json = boost::json;

namespace {

constexpr std::int64_t t0 = 1'800'000'000'000;

bool has(const jobs_report& rep, const std::string& what) {
    for (const auto& v : rep.violations) {
        if (v.find(what) != std::string::npos) {
            return true;
        }
    }
    return false;
}

std::string all(const jobs_report& rep) {
    std::string out;
    for (const auto& v : rep.violations) {
        out += v + "\n";
    }
    return out;
}

job_result ok_result(const std::string& id, json::value value, std::int64_t started) {
    job_result r;
    r.id = id;
    r.state = "succeeded";
    r.value = std::move(value);
    r.attempt = 1;
    r.started_ms = started;
    r.finished_ms = started + 2;
    return r;
}

/// Two delayed tasks (one failing with 2 retries), started after their due times.
jobs_recording delayed_run() {
    jobs_recording r;
    const json::value a1 = json::object{{"i", 1}};
    const json::value a2 = json::object{{"i", 2}, {"fail", true}};
    r.delayed.push_back({"d1", t0 + 1000, a1, 0});
    r.delayed.push_back({"d2", t0 + 1000, a2, 2});
    r.delayed_results.push_back(ok_result("d1", a1, t0 + 1010));
    job_result f;
    f.id = "d2";
    f.state = "failed";
    f.error_code = "handler_error";
    f.try_number = 3;
    f.error_finished_ms = {t0 + 1012, t0 + 1300};
    f.started_ms = t0 + 1500;
    r.delayed_results.push_back(f);
    r.starts = {
        {"d1", 1, t0 + 1010}, {"d2", 1, t0 + 1010}, {"d2", 1, t0 + 1200}, {"d2", 1, t0 + 1500}};
    return r;
}

/// A schedule every second, created at t0, decided up to t0 + 5 s: all five fired.
schedule_record schedule_all() {
    schedule_record s;
    s.name = "chaos-all";
    s.misfire = "all";
    s.every_ms = 1000;
    s.client = "0badcafe";
    s.args = json::object{{"schedule", "chaos-all"}};
    s.final_read = true;
    s.created_ms = t0;
    s.last_due_ms = t0 + 5000;
    s.fired = 5;
    for (int k = 1; k <= 5; ++k) {
        const auto due = t0 + k * 1000;
        s.results.push_back(
            ok_result(zkd::schedule::firing_task_id(s.client, 5, due), s.args, due + 3)
        );
    }
    return s;
}

json::object map_spec() {
    return json::parse(R"({"steps": {
        "src": {"type": "chaos-step", "args": [1, 2, 3]},
        "each": {"type": "chaos-step", "map": "src"},
        "fanin": {"type": "chaos-step", "args": {"n": 3}, "after": ["each"]}}})")
        .as_object();
}

workflow_record map_workflow() {
    workflow_record w;
    w.id = "wf-1800000000000-00c0ffee";
    w.shape = "map";
    const auto o = echo_workflow_outcome(map_spec());
    w.expected_result = o.result;
    w.expected_tasks = o.tasks;
    w.fan_in_task = "fan";
    w.status = "succeeded";
    w.result = o.result;
    for (const char* id : {"src", "fan", "e0", "e1", "e2"}) {
        w.results.push_back(ok_result(id, nullptr, t0));
    }
    return w;
}

}  // namespace

TEST(ChaosJobs, StartLogParsesLinesAndCountsTornOnes) {
    std::size_t bad = 0;
    const auto s = parse_start_log("t4-1-a 1 1800000000001\nt4-2-b 2 1800000000002\nt4-3", &bad);
    ASSERT_EQ(s.size(), 2U);
    EXPECT_EQ(s[1].id, "t4-2-b");
    EXPECT_EQ(s[1].attempt, 2);
    EXPECT_EQ(s[1].at_ms, 1800000000002);
    EXPECT_EQ(bad, 1U);
    parse_start_log("x y z\n\n", &bad);
    EXPECT_EQ(bad, 1U);
}

TEST(ChaosJobs, EchoWorkflowOutcomeFollowsTheInputsRules) {
    const auto o = echo_workflow_outcome(map_spec());
    EXPECT_EQ(o.tasks, 5U);  // src, three elements, fanin
    EXPECT_EQ(
        json::value(o.result), json::parse(R"({"fanin": {"n": 3, "inputs": {"each": [1, 2, 3]}}})")
    );
    const auto dag = echo_workflow_outcome(json::parse(R"({"steps": {
        "a": {"type": "x", "args": {"a": 1}},
        "b": {"type": "x", "args": {"b": 1}, "after": ["a"]},
        "c": {"type": "x", "args": 7, "after": ["a"]},
        "d": {"type": "x", "args": {"d": 1}, "after": ["b", "c", "b"]}}})")
                                               .as_object());
    EXPECT_EQ(dag.tasks, 4U);
    EXPECT_EQ(
        json::value(dag.result),
        json::parse(
            R"({"d": {"d": 1, "inputs": {"b": {"b": 1, "inputs": {"a": {"a": 1}}}, "c": 7}}})"
        )
    );
    const auto items = echo_workflow_outcome(json::parse(R"({"steps": {
        "s": {"type": "x", "args": ["p", "q"]},
        "m": {"type": "x", "map": "s", "args": {"k": 1}}}})")
                                                 .as_object());
    EXPECT_EQ(
        json::value(items.result),
        json::parse(
            R"({"m": [{"k": 1, "item": "p", "index": 0}, {"k": 1, "item": "q", "index": 1}]})"
        )
    );
}

TEST(ChaosJobs, ACleanRunPasses) {
    auto r = delayed_run();
    r.schedules.push_back(schedule_all());
    r.workflows.push_back(map_workflow());
    const auto rep = check_jobs(r);
    EXPECT_TRUE(rep.ok()) << all(rep);
    EXPECT_EQ(rep.delayed, 2U);
    EXPECT_EQ(rep.delayed_correct, 2U);
    EXPECT_EQ(rep.due_times, 5U);
    EXPECT_EQ(rep.firings, 5U);
    EXPECT_EQ(rep.workflows_succeeded, 1U);
    EXPECT_EQ(rep.lateness_max_ms, 10);
}

TEST(ChaosJobs, DelayedStartedBeforeItsDueTimeIsCaught) {
    auto r = delayed_run();
    r.starts.push_back({"d1", 2, t0 + 999});  // a second attempt, a millisecond early
    const auto rep = check_jobs(r);
    EXPECT_EQ(rep.early_starts, 1U);
    EXPECT_TRUE(has(rep, "delayed: started early: d1")) << all(rep);
}

TEST(ChaosJobs, DelayedStartedTwiceInOneAttemptIsCaught) {
    auto r = delayed_run();
    r.starts.push_back({"d1", 1, t0 + 1020});
    const auto rep = check_jobs(r);
    EXPECT_EQ(rep.started_twice, 1U);
    EXPECT_TRUE(has(rep, "delayed: started twice: d1")) << all(rep);
    // Retries start at attempt 1 each: three starts of attempt 1 are d2's three tries.
    EXPECT_FALSE(has(rep, "started twice: d2"));
}

TEST(ChaosJobs, DelayedLostDuplicatedOrRetriedWronglyIsCaught) {
    auto r = delayed_run();
    r.delayed_results.erase(r.delayed_results.begin());
    r.delayed_wait_errors["d1"] = "session expired";
    EXPECT_TRUE(has(check_jobs(r), "delayed: lost: d1"));

    r = delayed_run();
    r.leftover_results.emplace_back("d1");
    EXPECT_TRUE(has(check_jobs(r), "delayed: duplicated: d1"));

    r = delayed_run();
    r.delayed_results[1].try_number = 2;
    r.delayed_results[1].error_finished_ms.pop_back();
    EXPECT_TRUE(has(check_jobs(r), "delayed: wrong retries: d2"));

    r = delayed_run();
    r.delayed_results[1].started_ms = t0 + 1299;  // before the try before it ended
    EXPECT_TRUE(has(check_jobs(r), "delayed: retry early: d2"));

    r = delayed_run();
    r.delayed_results[0].value = json::object{{"i", 9}};
    EXPECT_TRUE(has(check_jobs(r), "delayed: wrong: d1"));
}

TEST(ChaosJobs, ScheduleFiringTwiceOrMissingIsCaught) {
    jobs_recording r;
    r.schedules.push_back(schedule_all());
    // The same due time's task run again (a second start of its first attempt).
    const auto id = r.schedules[0].results[2].id;
    r.starts = {{id, 1, t0 + 3005}, {id, 1, t0 + 3900}};
    EXPECT_TRUE(has(check_jobs(r), "schedule: started twice")) << all(check_jobs(r));

    r = {};
    r.schedules.push_back(schedule_all());
    r.schedules[0].results.push_back(r.schedules[0].results[1]);
    r.schedules[0].results.back().worker = "w2";
    EXPECT_TRUE(has(check_jobs(r), "schedule: fired twice"));

    r = {};
    r.schedules.push_back(schedule_all());
    r.schedules[0].results.erase(r.schedules[0].results.begin() + 1);
    const auto rep = check_jobs(r);
    EXPECT_TRUE(has(rep, "schedule: missed")) << all(rep);
    EXPECT_TRUE(has(rep, "schedule: firings"));

    r = {};
    r.schedules.push_back(schedule_all());
    r.schedules[0].fired = 4;  // decided 5 due times, counts say 4
    EXPECT_TRUE(has(check_jobs(r), "schedule: decided wrongly"));

    r = {};
    r.schedules.push_back(schedule_all());
    r.schedules[0].results.push_back(ok_result(
        zkd::schedule::firing_task_id("0badcafe", 5, t0 + 6000), r.schedules[0].args, t0 + 6001
    ));
    EXPECT_TRUE(has(check_jobs(r), "schedule: foreign firing"));

    r = {};
    r.schedules.push_back(schedule_all());
    r.starts = {{r.schedules[0].results[0].id, 1, t0 + 999}};
    EXPECT_TRUE(has(check_jobs(r), "schedule: started early"));
}

TEST(ChaosJobs, ScheduleOnceMayMissButFiresTheLatest) {
    jobs_recording r;
    auto s = schedule_all();
    s.misfire = "once";
    // A failover: due times 2 and 3 missed, 4 fired for them.
    s.results.erase(s.results.begin() + 1, s.results.begin() + 3);
    s.fired = 3;
    s.missed = 2;
    r.schedules.push_back(s);
    EXPECT_TRUE(check_jobs(r).ok()) << all(check_jobs(r));
    // The last one decided did not fire.
    r.schedules[0].results.pop_back();
    r.schedules[0].fired = 2;
    r.schedules[0].missed = 3;
    EXPECT_TRUE(has(check_jobs(r), "schedule: missed"));
    // Under all, the same misses are a violation.
    r.schedules[0] = s;
    r.schedules[0].misfire = "all";
    EXPECT_TRUE(has(check_jobs(r), "schedule: missed"));
}

TEST(ChaosJobs, WorkflowLaunchedTwiceOrWrongIsCaught) {
    jobs_recording r;
    r.workflows.push_back(map_workflow());
    r.starts = {{"fan", 1, t0}, {"fan", 1, t0 + 5}};
    auto rep = check_jobs(r);
    EXPECT_TRUE(has(rep, "workflow: launched twice")) << all(rep);
    EXPECT_TRUE(has(rep, "(the fan-in)"));

    r = {};
    r.workflows.push_back(map_workflow());
    r.workflows[0].results.pop_back();
    EXPECT_TRUE(has(check_jobs(r), "workflow: tasks"));

    r = {};
    r.workflows.push_back(map_workflow());
    r.workflows[0].result = json::object{{"fanin", 1}};
    EXPECT_TRUE(has(check_jobs(r), "workflow: wrong result"));

    r = {};
    r.workflows.push_back(map_workflow());
    r.workflows[0].status = "failed";
    EXPECT_TRUE(has(check_jobs(r), "workflow: failed"));

    r = {};
    r.workflows.push_back(map_workflow());
    r.workflows[0].results.erase(r.workflows[0].results.begin() + 1);  // "fan"
    r.workflows[0].results.push_back(ok_result("e3", nullptr, t0));
    EXPECT_TRUE(has(check_jobs(r), "workflow: fan-in"));
}

TEST(ChaosJobs, WorkloadOptions) {
    const auto def = parse_args({}).s.work;
    EXPECT_TRUE(def.echo);
    EXPECT_FALSE(def.jobs());
    const auto jobs = parse_args({"--workload", "jobs"}).s.work;
    EXPECT_FALSE(jobs.echo);
    EXPECT_TRUE(jobs.delayed && jobs.schedules && jobs.workflows);
    const auto every = parse_args({"--workload=all"}).s.work;
    EXPECT_TRUE(every.echo && every.delayed && every.schedules && every.workflows);
    const auto two = parse_args({"--workload", "echo,schedules"}).s.work;
    EXPECT_TRUE(two.echo && two.schedules);
    EXPECT_FALSE(two.delayed || two.workflows);
    EXPECT_THROW(parse_args({"--workload", "echo,cron"}), usage_error);
    EXPECT_THROW(parse_args({"--workload", ""}), usage_error);
}

}  // namespace ZKD_UNITY_ID
