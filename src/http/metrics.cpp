// SPDX-License-Identifier: MIT
#include "http/metrics.hpp"

#include "workflow/state.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>

namespace zkd::http {

namespace {

/// Appends families to a text exposition.
class writer {
public:
    /// The HELP and TYPE lines of a family.
    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
        out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    }

    /// One sample; `labels` is the inside of the braces ("" for none), already escaped.
    void sample(std::string_view name, std::string_view labels, std::string_view value) {
        out_.append(name);
        if (!labels.empty()) {
            out_.append("{").append(labels).append("}");
        }
        out_.append(" ").append(value).append("\n");
    }

    void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
        sample(name, labels, std::to_string(value));
    }

    void sample(std::string_view name, std::string_view labels, std::int64_t value) {
        sample(name, labels, std::to_string(value));
    }

    void sample(std::string_view name, std::string_view labels, double value) {
        sample(name, labels, format_sample(value));
    }

    /// A family with a single unlabelled sample.
    template <class T>
    void single(std::string_view name, std::string_view type, std::string_view help, T value) {
        family(name, type, help);
        sample(name, "", value);
    }

    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

std::string label(std::string_view key, std::string_view value) {
    std::string s(key);
    s.append("=\"");
    for (const char c : value) {
        switch (c) {
        case '\\':
            s.append("\\\\");
            break;
        case '"':
            s.append("\\\"");
            break;
        case '\n':
            s.append("\\n");
            break;
        default:
            s.push_back(c);
        }
    }
    s.append("\"");
    return s;
}

double seconds(std::chrono::nanoseconds d) {
    return std::chrono::duration<double>(d).count();
}

void render_node(writer& w, const roles::node_stats& n) {
    w.family(
        "zkd_tasks_completed_total", "counter", "Results this node's worker published, by state."
    );
    w.sample("zkd_tasks_completed_total", label("state", "succeeded"), n.succeeded);
    w.sample("zkd_tasks_completed_total", label("state", "failed"), n.failed);
    w.sample("zkd_tasks_completed_total", label("state", "timed_out"), n.timed_out);
    w.sample("zkd_tasks_completed_total", label("state", "cancelled"), n.cancelled);

    const auto& m = n.master_totals;
    w.single(
        "zkd_tasks_assigned_total", "counter",
        "Tasks this node assigned to workers as master (T2 committed).", m.assigned
    );
    w.single(
        "zkd_tasks_requeued_total", "counter",
        "Tasks of departed workers this node put back to pending as master.", m.requeued
    );
    w.single(
        "zkd_tasks_lost_total", "counter",
        "Tasks this node ended as lost (attempts exhausted) as master.", m.lost
    );
    w.single(
        "zkd_tasks_rejected_total", "counter",
        "Malformed or unknown-type tasks this node failed as master.", m.rejected
    );
    w.single(
        "zkd_tasks_taken_back_total", "counter",
        "Assignments this node took back as master from live workers that left them "
        "unstarted (zkd run --suspect-after).",
        m.taken_back
    );
    if (n.queue_depth >= 0) {
        w.single(
            "zkd_queue_depth", "gauge", "Pending tasks in the master's view (master only).",
            n.queue_depth
        );
        w.single(
            "zkd_workers_suspect", "gauge",
            "Workers that left assignments unstarted and get only a probe (master only).",
            m.suspects
        );
    }
    if (n.max_pending >= 0) {
        w.single(
            "zkd_max_pending", "gauge",
            "The bound on pending tasks this master publishes (zkd run --max-pending; 0: none; "
            "master only).",
            n.max_pending
        );
    }

    constexpr std::string_view hist = "zkd_assign_latency_seconds";
    w.family(hist, "histogram", "Time from submission to assignment, as master.");
    const auto& h = n.assign_latency;
    for (std::size_t i = 0; i < roles::latency_histogram::bounds_ms.size(); ++i) {
        w.sample(
            "zkd_assign_latency_seconds_bucket",
            label("le", format_sample(roles::latency_histogram::bounds_ms[i] / 1000.0)), h.counts[i]
        );
    }
    w.sample("zkd_assign_latency_seconds_bucket", label("le", "+Inf"), h.counts.back());
    w.sample("zkd_assign_latency_seconds_sum", "", h.sum_ms / 1000.0);
    w.sample("zkd_assign_latency_seconds_count", "", h.count());

    w.single(
        "zkd_master", "gauge", "1 while this node is the acting master, else 0.",
        std::uint64_t{n.master ? 1U : 0U}
    );
    w.single("zkd_master_epoch", "gauge", "The epoch while master (0 otherwise).", n.epoch);

    w.family("zkd_zk_session_state", "gauge", "The node's ZooKeeper session state (1: current).");
    constexpr std::array states{zkco::session_state::connecting,   zkco::session_state::connected,
                                zkco::session_state::disconnected, zkco::session_state::expired,
                                zkco::session_state::auth_failed,  zkco::session_state::closed};
    for (const auto s : states) {
        w.sample(
            "zkd_zk_session_state", label("state", zkco::to_string(s)),
            std::uint64_t{s == n.session ? 1U : 0U}
        );
    }
    w.single(
        "zkd_zk_sessions_total", "counter", "ZooKeeper sessions the node established.", n.sessions
    );
    w.single(
        "zkd_worker_tasks_started_total", "counter", "Tasks this node's worker started.",
        n.worker.started
    );
    w.single(
        "zkd_worker_results_discarded_total", "counter",
        "Results this node's worker dropped because the task had been requeued.", n.worker.discarded
    );

    // Change logs (docs/protocol.md §6): listings beyond the first per directory mean reads
    // that could not follow the log (a missed version, garbage, a writer keeping no log).
    // dir="pending": the pending shards, as master; dir="assign": its directory, as worker.
    struct by_dir {
        std::string_view name, help;
        std::uint64_t pending, assign;
    };
    for (const auto& f : {
             by_dir{
                 "zkd_change_log_reads_total",
                 "Reads of a directory's change log this node followed (applied).",
                 n.master_totals.shard_log_reads, n.worker.logs_read},
             by_dir{
                 "zkd_directory_listings_total",
                 "Listings of those directories: one each to start, then only when a change "
                 "log could not be followed.",
                 n.master_totals.shard_listings, n.worker.listings},
             by_dir{
                 "zkd_task_reads_total",
                 "Tasks this node read one by one (as master, pending tasks; as worker, its "
                 "assignments) because no change log it followed carried their data.",
                 n.master_totals.task_reads, n.worker.task_reads},
         }) {
        w.family(f.name, "counter", f.help);
        w.sample(f.name, label("dir", "pending"), f.pending);
        w.sample(f.name, label("dir", "assign"), f.assign);
    }
}

/// Delayed tasks, retries, schedules and workflows: counters always, the gauges of the
/// master's views only while this node is master. All from memory: no ZooKeeper read.
void render_jobs(writer& w, const roles::node_stats& n) {
    const bool master = n.queue_depth >= 0;
    const auto& m = n.master_totals;
    w.single(
        "zkd_worker_tries_retried_total", "counter",
        "Tries this node's worker ended with a retry (failed or timed out with retries left; "
        "the task waits in the delayed tree): not results, not in zkd_tasks_completed_total.",
        n.worker.retried
    );
    w.single(
        "zkd_delayed_released_total", "counter",
        "Delayed tasks and retries this node moved to pending when due, as master (T10).",
        m.released
    );
    if (master) {
        w.single(
            "zkd_delayed_tasks", "gauge",
            "Delayed tasks and retries waiting in the master's view (master only).", m.delayed
        );
        if (m.delayed_next_due_ms > 0) {
            w.single(
                "zkd_delayed_next_due_timestamp_seconds", "gauge",
                "When the earliest delayed task is due, Unix time (master only; absent when "
                "none waits; a retry not yet read counts its id's time, a lower bound).",
                static_cast<double>(m.delayed_next_due_ms) / 1000.0
            );
        }
    }

    const auto& sc = n.schedules;
    w.single(
        "zkd_schedule_firings_total", "counter",
        "Schedule firings whose task this node created, as master (S4 committed).", sc.fired
    );
    w.single(
        "zkd_schedule_firings_late_total", "counter",
        "Of those, firings written more than 1 s after their due time.", sc.late
    );
    w.single(
        "zkd_schedule_lateness_seconds_total", "counter",
        "Over those firings, the time each was written less its due time, summed (divided by "
        "zkd_schedule_firings_total: the mean lateness).",
        static_cast<double>(sc.lateness_ms_sum) / 1000.0
    );
    w.family(
        "zkd_schedule_passed_total", "counter",
        "Due times a schedule passed over, as master: overlap (--no-overlap, the previous "
        "firing still running), misfire (the misfire policy, after downtime)."
    );
    w.sample("zkd_schedule_passed_total", label("reason", "overlap"), sc.skipped);
    w.sample("zkd_schedule_passed_total", label("reason", "misfire"), sc.missed);
    if (master) {
        w.family(
            "zkd_schedules", "gauge", "Schedules in the master's view, by state (master only)."
        );
        w.sample(
            "zkd_schedules", label("state", "active"), std::uint64_t{sc.schedules - sc.paused}
        );
        w.sample("zkd_schedules", label("state", "paused"), std::uint64_t{sc.paused});
        if (sc.last_lateness_ms >= 0) {
            w.single(
                "zkd_schedule_last_lateness_seconds", "gauge",
                "The latest firing's lateness: written less due time (master only, once one "
                "fired in this term).",
                static_cast<double>(sc.last_lateness_ms) / 1000.0
            );
        }
    }

    const auto& wf = n.workflows;
    w.single(
        "zkd_workflow_tasks_launched_total", "counter",
        "Workflow step tasks this node created, as master (W2 committed).", wf.launched
    );
    w.single(
        "zkd_workflow_tasks_placed_total", "counter",
        "Of those, the tasks W2 placed on a worker itself (direct placement).", wf.placed
    );
    w.single(
        "zkd_workflows_finished_total", "counter",
        "Workflows that ended while this node was master.", wf.finished
    );
    if (master) {
        w.family(
            "zkd_workflows", "gauge",
            "Workflows the master follows (every one not yet deleted by retention), by state "
            "(master only)."
        );
        for (std::size_t i = 0; i < roles::workflow_statuses.size(); ++i) {
            w.sample(
                "zkd_workflows", label("state", workflow::to_string(roles::workflow_statuses[i])),
                std::uint64_t{wf.workflows[i]}
            );
        }
        w.family(
            "zkd_workflow_steps", "gauge",
            "The steps of those workflows, by state (master only; a map step counts once)."
        );
        for (std::size_t i = 0; i < roles::step_statuses.size(); ++i) {
            w.sample(
                "zkd_workflow_steps", label("state", workflow::to_string(roles::step_statuses[i])),
                std::uint64_t{wf.steps[i]}
            );
        }
    }
}

void render_lag(writer& w, const reactor::lag_stats& lag) {
    // A summary: the quantiles cover the probe's window (the last samples), the sum and
    // count every sample since the start, as Prometheus client summaries do.
    w.family(
        "zkd_event_loop_lag_seconds", "summary",
        "Event-loop lag: quantiles 0.99 and 1 (max) over the probe's window; sum and count of "
        "every sample."
    );
    w.sample("zkd_event_loop_lag_seconds", label("quantile", "0.99"), seconds(lag.p99));
    w.sample("zkd_event_loop_lag_seconds", label("quantile", "1"), seconds(lag.max));
    w.sample("zkd_event_loop_lag_seconds_sum", "", seconds(lag.sum));
    w.sample("zkd_event_loop_lag_seconds_count", "", lag.samples);
    w.single(
        "zkd_event_loop_lag_last_seconds", "gauge", "The latest event-loop lag sample.",
        seconds(lag.last)
    );
    if (!lag.sched_known) {
        return;
    }
    w.single(
        "zkd_event_loop_cpu_seconds_total", "counter",
        "The event loop's thread's time on a CPU, since the lag probe's first sample.",
        seconds(lag.cpu_total)
    );
    w.single(
        "zkd_event_loop_cpu_wait_seconds_total", "counter",
        "The event loop's thread's time runnable but waiting for a CPU (the machine's load), "
        "since the lag probe's first sample.",
        seconds(lag.cpu_wait_total)
    );
}

}  // namespace

std::string format_sample(double v) {
    if (std::isnan(v)) {
        return "NaN";
    }
    if (std::isinf(v)) {
        return v > 0 ? "+Inf" : "-Inf";
    }
    // Shortest round-trip digits; plain decimals ("0.0005", not "5e-04") for the magnitudes
    // latencies and counts have, exponents beyond.
    const double mag = std::fabs(v);
    const bool plain = mag == 0 || (mag >= 1e-6 && mag < 1e15);
    std::array<char, 64> buf{};
    const auto [end, ec] =
        plain ? std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed)
              : std::to_chars(buf.data(), buf.data() + buf.size(), v);
    if (ec != std::errc{}) {
        return "NaN";  // cannot happen: 64 characters hold any double
    }
    return {buf.data(), end};
}

std::string render_metrics(
    const std::optional<roles::node_stats>& node,
    const std::optional<reactor::lag_stats>& lag,
    const facade_counters& facade
) {
    writer w;
    w.single(
        "zkd_tasks_submitted_total", "counter", "Tasks submitted through the HTTP facade.",
        facade.tasks_submitted
    );
    w.single(
        "zkd_tasks_placed_directly_total", "counter",
        "Tasks submitted through the HTTP facade that its client placed on a worker itself, "
        "without the master (docs/protocol.md 6 T1 Direct placement).",
        facade.tasks_placed_directly
    );
    w.family("zkd_http_requests_total", "counter", "HTTP responses sent, by status code.");
    for (const auto& [code, count] : facade.responses) {
        w.sample("zkd_http_requests_total", label("code", std::to_string(code)), count);
    }
    w.family(
        "zkd_http_rejected_total", "counter",
        "Connections closed by the server: busy (answered 503 at once, every slot serving a "
        "request), waiting (closed while waiting on a slow or idle client, to make room)."
    );
    w.sample("zkd_http_rejected_total", label("reason", "busy"), facade.rejected_busy);
    w.sample("zkd_http_rejected_total", label("reason", "waiting"), facade.closed_waiting);
    w.single(
        "zkd_http_waits_abandoned_total", "counter",
        "POST ?wait requests whose client left before the result came (the result was kept).",
        facade.waits_abandoned
    );
    if (node) {
        render_node(w, *node);
        render_jobs(w, *node);
    }
    if (lag) {
        render_lag(w, *lag);
    }
    return w.take();
}

}  // namespace zkd::http
