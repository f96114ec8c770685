// SPDX-License-Identifier: MIT
// The Prometheus rendering of src/http/metrics: names, values, omissions, and the structure
// of the text format (each family declared once, before its samples, samples contiguous).
#include "http/metrics.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace std::chrono_literals;
using zkd::http::facade_counters;
using zkd::http::format_sample;
using zkd::http::render_metrics;

namespace {

/// Every sample line, "name{labels}" -> value.
std::map<std::string, std::string> samples(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line.front() == '#') {
            continue;
        }
        const auto space = line.rfind(' ');
        out[line.substr(0, space)] = line.substr(space + 1);
    }
    return out;
}

/// Checks the exposition's structure; returns what is wrong, or "".
std::string structure_problems(const std::string& text) {
    std::map<std::string, std::string> types;  // family -> type
    std::set<std::string> finished;            // families whose samples are over
    std::string current;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("# HELP ", 0) == 0) {
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            std::istringstream words(line.substr(7));
            std::string name;
            std::string type;
            words >> name >> type;
            if (types.contains(name)) {
                return "family declared twice: " + name;
            }
            types[name] = type;
            if (!current.empty()) {
                finished.insert(current);
            }
            current = name;
            continue;
        }
        if (line.empty() || line.front() == '#') {
            return "unexpected line: " + line;
        }
        std::string name = line.substr(0, line.find_first_of("{ "));
        // Prometheus reserves these labels for histograms and summaries (promtool refuses
        // them elsewhere).
        if (line.find("{quantile=") != std::string::npos && types[current] != "summary") {
            return "a quantile label outside a summary: " + line;
        }
        if (line.find("{le=") != std::string::npos && types[current] != "histogram") {
            return "an le label outside a histogram: " + line;
        }
        if (types[current] == "histogram" || types[current] == "summary") {
            for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
                if (name.ends_with(suffix)) {
                    name.resize(name.size() - suffix.size());
                    break;
                }
            }
        }
        if (name != current) {
            return "sample outside its family: " + line;
        }
        if (finished.contains(name)) {
            return "family samples not contiguous: " + name;
        }
    }
    return {};
}

zkd::roles::node_stats some_node() {
    zkd::roles::node_stats n;
    n.member = "h-1-00000000";
    n.session = zkd::zkco::session_state::connected;
    n.sessions = 2;
    n.master = true;
    n.epoch = 7;
    n.queue_depth = 42;
    n.max_pending = 1000000;
    n.worker.started = 11;
    n.worker.discarded = 1;
    n.worker.listings = 2;
    n.worker.logs_read = 30;
    n.master_totals.shard_listings = 16;
    n.master_totals.task_reads = 400;
    n.worker.task_reads = 3;
    n.master_totals.shard_log_reads = 250;
    n.succeeded = 5;
    n.failed = 3;
    n.timed_out = 2;
    n.cancelled = 1;
    n.master_totals.assigned = 13;
    n.master_totals.requeued = 4;
    n.master_totals.lost = 1;
    n.master_totals.rejected = 6;
    n.assign_latency.observe(0.3);    // <= 0.5 ms
    n.assign_latency.observe(7);      // <= 10 ms
    n.assign_latency.observe(20000);  // only +Inf
    return n;
}

}  // namespace

TEST(HttpMetrics, FacadeCountersAlone) {
    facade_counters f;
    f.tasks_submitted = 9;
    f.tasks_placed_directly = 7;
    f.responses[200] = 4;
    f.responses[404] = 1;
    const auto text = render_metrics(std::nullopt, std::nullopt, f);
    EXPECT_EQ(structure_problems(text), "");
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_tasks_submitted_total"), "9");
    EXPECT_EQ(s.at("zkd_tasks_placed_directly_total"), "7");
    EXPECT_EQ(s.at("zkd_http_requests_total{code=\"200\"}"), "4");
    EXPECT_EQ(s.at("zkd_http_requests_total{code=\"404\"}"), "1");
    // Without a node or a probe their families are left out entirely.
    EXPECT_EQ(text.find("zkd_master"), std::string::npos);
    EXPECT_EQ(text.find("zkd_event_loop_lag"), std::string::npos);
    EXPECT_EQ(text.find("zkd_queue_depth"), std::string::npos);
}

TEST(HttpMetrics, NodeFigures) {
    const auto text = render_metrics(some_node(), std::nullopt, facade_counters{});
    EXPECT_EQ(structure_problems(text), "") << text;
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_tasks_completed_total{state=\"succeeded\"}"), "5");
    EXPECT_EQ(s.at("zkd_tasks_completed_total{state=\"failed\"}"), "3");
    EXPECT_EQ(s.at("zkd_tasks_completed_total{state=\"timed_out\"}"), "2");
    EXPECT_EQ(s.at("zkd_tasks_completed_total{state=\"cancelled\"}"), "1");
    EXPECT_EQ(s.at("zkd_tasks_assigned_total"), "13");
    EXPECT_EQ(s.at("zkd_tasks_requeued_total"), "4");
    EXPECT_EQ(s.at("zkd_tasks_lost_total"), "1");
    EXPECT_EQ(s.at("zkd_tasks_rejected_total"), "6");
    EXPECT_EQ(s.at("zkd_queue_depth"), "42");
    EXPECT_EQ(s.at("zkd_master"), "1");
    EXPECT_EQ(s.at("zkd_master_epoch"), "7");
    EXPECT_EQ(s.at("zkd_zk_session_state{state=\"connected\"}"), "1");
    EXPECT_EQ(s.at("zkd_zk_session_state{state=\"disconnected\"}"), "0");
    EXPECT_EQ(s.at("zkd_zk_session_state{state=\"expired\"}"), "0");
    EXPECT_EQ(s.at("zkd_zk_sessions_total"), "2");
    EXPECT_EQ(s.at("zkd_worker_tasks_started_total"), "11");
    EXPECT_EQ(s.at("zkd_worker_results_discarded_total"), "1");
    EXPECT_EQ(s.at("zkd_change_log_reads_total{dir=\"pending\"}"), "250");
    EXPECT_EQ(s.at("zkd_change_log_reads_total{dir=\"assign\"}"), "30");
    EXPECT_EQ(s.at("zkd_directory_listings_total{dir=\"pending\"}"), "16");
    EXPECT_EQ(s.at("zkd_directory_listings_total{dir=\"assign\"}"), "2");
    EXPECT_EQ(s.at("zkd_task_reads_total{dir=\"pending\"}"), "400");
    EXPECT_EQ(s.at("zkd_task_reads_total{dir=\"assign\"}"), "3");
    EXPECT_NE(text.find("# TYPE zkd_assign_latency_seconds histogram"), std::string::npos);
    EXPECT_NE(text.find("# TYPE zkd_tasks_completed_total counter"), std::string::npos);
    EXPECT_NE(text.find("# TYPE zkd_queue_depth gauge"), std::string::npos);
    EXPECT_EQ(s.at("zkd_max_pending"), "1000000");
    EXPECT_NE(text.find("# TYPE zkd_max_pending gauge"), std::string::npos);
}

TEST(HttpMetrics, AssignLatencyIsACumulativeHistogramInSeconds) {
    const auto s = samples(render_metrics(some_node(), std::nullopt, facade_counters{}));
    EXPECT_EQ(s.at("zkd_assign_latency_seconds_bucket{le=\"0.0005\"}"), "1");
    EXPECT_EQ(s.at("zkd_assign_latency_seconds_bucket{le=\"0.005\"}"), "1");
    EXPECT_EQ(s.at("zkd_assign_latency_seconds_bucket{le=\"0.01\"}"), "2");
    EXPECT_EQ(s.at("zkd_assign_latency_seconds_bucket{le=\"10\"}"), "2");
    EXPECT_EQ(s.at("zkd_assign_latency_seconds_bucket{le=\"+Inf\"}"), "3");
    EXPECT_EQ(s.at("zkd_assign_latency_seconds_count"), "3");
    EXPECT_NEAR(std::stod(s.at("zkd_assign_latency_seconds_sum")), 20.0073, 1e-9);
    // Every bound of the node's histogram is a bucket, in order, and counts never decrease.
    std::uint64_t last = 0;
    for (const double ms : zkd::roles::latency_histogram::bounds_ms) {
        const auto key =
            "zkd_assign_latency_seconds_bucket{le=\"" + format_sample(ms / 1000) + "\"}";
        ASSERT_TRUE(s.contains(key)) << key;
        const auto n = std::stoull(s.at(key));
        EXPECT_GE(n, last);
        last = n;
    }
}

TEST(HttpMetrics, QueueDepthOnlyWhileMaster) {
    auto n = some_node();
    n.master = false;
    n.queue_depth = -1;
    n.max_pending = -1;
    n.session = zkd::zkco::session_state::disconnected;
    const auto text = render_metrics(n, std::nullopt, facade_counters{});
    EXPECT_EQ(text.find("zkd_queue_depth"), std::string::npos);
    EXPECT_EQ(text.find("zkd_max_pending"), std::string::npos);
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_master"), "0");
    EXPECT_EQ(s.at("zkd_zk_session_state{state=\"connected\"}"), "0");
    EXPECT_EQ(s.at("zkd_zk_session_state{state=\"disconnected\"}"), "1");
}

TEST(HttpMetrics, DelayedTasksSchedulesAndWorkflowsAsMaster) {
    auto n = some_node();
    n.worker.retried = 4;
    n.master_totals.released = 12;
    n.master_totals.delayed = 3;
    n.master_totals.delayed_next_due_ms = 1'700'000'000'500;
    n.schedules.fired = 10;
    n.schedules.late = 2;
    n.schedules.lateness_ms_sum = 4'500;
    n.schedules.last_lateness_ms = 20;
    n.schedules.skipped = 1;
    n.schedules.missed = 5;
    n.schedules.schedules = 4;
    n.schedules.paused = 1;
    n.workflows.launched = 30;
    n.workflows.placed = 20;
    n.workflows.finished = 6;
    n.workflows.workflows = {2, 3, 1, 0};     // running, succeeded, failed, cancelled
    n.workflows.steps = {1, 2, 20, 1, 3, 0};  // waiting, running, succeeded, failed, ...
    const auto text = render_metrics(n, std::nullopt, facade_counters{});
    EXPECT_EQ(structure_problems(text), "") << text;
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_worker_tries_retried_total"), "4");
    EXPECT_EQ(s.at("zkd_delayed_released_total"), "12");
    EXPECT_EQ(s.at("zkd_delayed_tasks"), "3");
    EXPECT_EQ(s.at("zkd_delayed_next_due_timestamp_seconds"), "1700000000.5");
    EXPECT_EQ(s.at("zkd_schedule_firings_total"), "10");
    EXPECT_EQ(s.at("zkd_schedule_firings_late_total"), "2");
    EXPECT_EQ(s.at("zkd_schedule_lateness_seconds_total"), "4.5");
    EXPECT_EQ(s.at("zkd_schedule_last_lateness_seconds"), "0.02");
    EXPECT_EQ(s.at("zkd_schedule_passed_total{reason=\"overlap\"}"), "1");
    EXPECT_EQ(s.at("zkd_schedule_passed_total{reason=\"misfire\"}"), "5");
    EXPECT_EQ(s.at("zkd_schedules{state=\"active\"}"), "3");
    EXPECT_EQ(s.at("zkd_schedules{state=\"paused\"}"), "1");
    EXPECT_EQ(s.at("zkd_workflow_tasks_launched_total"), "30");
    EXPECT_EQ(s.at("zkd_workflow_tasks_placed_total"), "20");
    EXPECT_EQ(s.at("zkd_workflows_finished_total"), "6");
    EXPECT_EQ(s.at("zkd_workflows{state=\"running\"}"), "2");
    EXPECT_EQ(s.at("zkd_workflows{state=\"succeeded\"}"), "3");
    EXPECT_EQ(s.at("zkd_workflows{state=\"failed\"}"), "1");
    EXPECT_EQ(s.at("zkd_workflows{state=\"cancelled\"}"), "0");
    EXPECT_EQ(s.at("zkd_workflow_steps{state=\"waiting\"}"), "1");
    EXPECT_EQ(s.at("zkd_workflow_steps{state=\"succeeded\"}"), "20");
    EXPECT_EQ(s.at("zkd_workflow_steps{state=\"skipped\"}"), "3");
    EXPECT_NE(text.find("# TYPE zkd_delayed_tasks gauge"), std::string::npos);
    EXPECT_NE(text.find("# TYPE zkd_schedule_firings_total counter"), std::string::npos);
}

TEST(HttpMetrics, TheMastersViewsOnlyWhileMaster) {
    auto n = some_node();
    n.master = false;
    n.queue_depth = -1;
    n.worker.retried = 2;
    n.schedules.fired = 7;  // counters stay: what this node did as master before
    n.master_totals.delayed_next_due_ms = 0;
    const auto text = render_metrics(n, std::nullopt, facade_counters{});
    EXPECT_EQ(structure_problems(text), "") << text;
    for (const char* gauge :
         {"zkd_delayed_tasks", "zkd_delayed_next_due_timestamp_seconds", "zkd_schedules{",
          "zkd_schedule_last_lateness_seconds", "zkd_workflows{", "zkd_workflow_steps{"}) {
        EXPECT_EQ(text.find(gauge), std::string::npos) << gauge;
    }
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_worker_tries_retried_total"), "2");
    EXPECT_EQ(s.at("zkd_schedule_firings_total"), "7");
    // As master with nothing delayed and no firing yet: no due time, no lateness.
    n.queue_depth = 0;
    const auto idle = render_metrics(n, std::nullopt, facade_counters{});
    EXPECT_EQ(samples(idle).at("zkd_delayed_tasks"), "0");
    EXPECT_EQ(idle.find("zkd_delayed_next_due_timestamp_seconds"), std::string::npos);
    EXPECT_EQ(idle.find("zkd_schedule_last_lateness_seconds"), std::string::npos);
}

TEST(HttpMetrics, EventLoopLag) {
    zkd::reactor::lag_stats lag;
    lag.last = 1500us;
    lag.max = 250ms;
    lag.p99 = 12ms;
    lag.sum = 3500ms;
    lag.samples = 70;
    const auto text = render_metrics(std::nullopt, lag, facade_counters{});
    EXPECT_EQ(structure_problems(text), "") << text;
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_event_loop_lag_seconds{quantile=\"0.99\"}"), "0.012");
    EXPECT_EQ(s.at("zkd_event_loop_lag_seconds{quantile=\"1\"}"), "0.25");
    EXPECT_EQ(s.at("zkd_event_loop_lag_seconds_sum"), "3.5");
    EXPECT_EQ(s.at("zkd_event_loop_lag_seconds_count"), "70");
    EXPECT_EQ(s.at("zkd_event_loop_lag_last_seconds"), "0.0015");
    // A quantile label belongs to a summary (promtool refuses it on a gauge).
    EXPECT_NE(text.find("# TYPE zkd_event_loop_lag_seconds summary"), std::string::npos);
    // Without the loop thread's scheduler counters, none is made up.
    EXPECT_EQ(text.find("zkd_event_loop_cpu_seconds_total"), std::string::npos);
    EXPECT_EQ(text.find("zkd_event_loop_cpu_wait_seconds_total"), std::string::npos);
}

TEST(HttpMetrics, EventLoopThreadsTimeOnACpuAndWaitingForOne) {
    zkd::reactor::lag_stats lag;
    lag.max = 20ms;
    lag.p99 = 12ms;
    lag.samples = 70;
    lag.sched_known = true;
    lag.cpu_total = 1500ms;
    lag.cpu_wait_total = 2250ms;
    const auto text = render_metrics(std::nullopt, lag, facade_counters{});
    EXPECT_EQ(structure_problems(text), "") << text;
    const auto s = samples(text);
    EXPECT_EQ(s.at("zkd_event_loop_lag_seconds{quantile=\"0.99\"}"), "0.012");
    EXPECT_EQ(s.at("zkd_event_loop_cpu_seconds_total"), "1.5");
    EXPECT_EQ(s.at("zkd_event_loop_cpu_wait_seconds_total"), "2.25");
    EXPECT_NE(text.find("# TYPE zkd_event_loop_cpu_seconds_total counter"), std::string::npos);
    EXPECT_NE(text.find("# TYPE zkd_event_loop_cpu_wait_seconds_total counter"), std::string::npos);
}

TEST(HttpMetrics, SampleFormatting) {
    EXPECT_EQ(format_sample(0), "0");
    EXPECT_EQ(format_sample(0.1), "0.1");
    EXPECT_EQ(format_sample(2.5), "2.5");
    EXPECT_EQ(format_sample(1e21), "1e+21");
    EXPECT_EQ(format_sample(0.0005), "0.0005");
    EXPECT_EQ(format_sample(1234567), "1234567");
    EXPECT_EQ(format_sample(-2.25), "-2.25");
    EXPECT_EQ(format_sample(std::numeric_limits<double>::infinity()), "+Inf");
    EXPECT_EQ(format_sample(-std::numeric_limits<double>::infinity()), "-Inf");
    EXPECT_EQ(format_sample(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

}  // namespace ZKD_UNITY_ID
