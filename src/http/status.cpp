// SPDX-License-Identifier: MIT
#include "http/status.hpp"

#include "protocol/ids.hpp"
#include "workflow/state.hpp"
#include "zkco/types.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <iterator>

namespace json = boost::json;

namespace zkd::http {

namespace {

/// The submission time a task id holds (ms), 0 when it is not a task id.
std::int64_t id_time(std::string_view id) {
    if (!protocol::is_valid_task_id(id)) {
        return 0;
    }
    std::int64_t ms = 0;
    for (const char c : id.substr(3, 13)) {
        ms = ms * 10 + (c - '0');
    }
    return ms;
}

double per_second(std::uint64_t later, std::uint64_t earlier, double seconds) {
    if (later < earlier || seconds <= 0) {
        return 0;
    }
    return static_cast<double>(later - earlier) / seconds;
}

json::value nullable(std::optional<double> v) {
    return v ? json::value(*v) : json::value(nullptr);
}

}  // namespace

status_history::status_history(std::size_t capacity)
    : capacity_(std::max<std::size_t>(capacity, 2)) {}

void status_history::record(std::int64_t t_ms, const roles::node_stats& s) {
    history_sample h;
    h.t_ms = t_ms;
    h.master = s.master;
    h.queue_depth = s.queue_depth;
    h.assigned = s.master_totals.assigned;
    h.requeued = s.master_totals.requeued;
    h.lost = s.master_totals.lost;
    h.rejected = s.master_totals.rejected;
    h.finished = s.master_totals.finished;
    h.succeeded = s.succeeded;
    h.failed = s.failed;
    h.timed_out = s.timed_out;
    h.cancelled = s.cancelled;
    h.assign_latency = s.assign_latency;
    ring_.push_back(h);
    while (ring_.size() > capacity_) {
        ring_.pop_front();
    }
}

json::value status_history::to_json() const {
    json::array intervals;
    for (std::size_t i = 1; i < ring_.size(); ++i) {
        const auto& a = ring_[i - 1];
        const auto& b = ring_[i];
        const double s = static_cast<double>(b.t_ms - a.t_ms) / 1000.0;
        const auto lat = histogram_delta(b.assign_latency, a.assign_latency);
        json::object o;
        o["t"] = b.t_ms;
        o["seconds"] = s;
        o["master"] = b.master;
        o["queue_depth"] = b.queue_depth >= 0 ? json::value(b.queue_depth) : json::value(nullptr);
        o["assigned"] = per_second(b.assigned, a.assigned, s);
        o["finished"] = per_second(b.finished, a.finished, s);
        o["requeued"] = per_second(b.requeued, a.requeued, s);
        o["lost"] = per_second(b.lost, a.lost, s);
        o["rejected"] = per_second(b.rejected, a.rejected, s);
        o["succeeded"] = per_second(b.succeeded, a.succeeded, s);
        o["failed"] = per_second(b.failed, a.failed, s);
        o["timed_out"] = per_second(b.timed_out, a.timed_out, s);
        o["cancelled"] = per_second(b.cancelled, a.cancelled, s);
        o["assign_p50_ms"] = nullable(histogram_quantile(0.5, lat));
        o["assign_p99_ms"] = nullable(histogram_quantile(0.99, lat));
        intervals.push_back(std::move(o));
    }
    return json::object{
        {"capacity", capacity_},
        {"intervals", std::move(intervals)},
    };
}

roles::latency_histogram histogram_delta(
    const roles::latency_histogram& later, const roles::latency_histogram& earlier
) {
    roles::latency_histogram d;
    for (std::size_t i = 0; i < d.counts.size(); ++i) {
        d.counts[i] =
            later.counts[i] >= earlier.counts[i] ? later.counts[i] - earlier.counts[i] : 0;
    }
    d.sum_ms = std::max(0.0, later.sum_ms - earlier.sum_ms);
    return d;
}

std::optional<double> histogram_quantile(double q, const roles::latency_histogram& h) {
    const auto total = h.count();
    if (total == 0) {
        return std::nullopt;
    }
    q = std::clamp(q, 0.0, 1.0);
    const double rank = q * static_cast<double>(total);
    const auto& bounds = roles::latency_histogram::bounds_ms;
    for (std::size_t i = 0; i < bounds.size(); ++i) {
        const auto below = i == 0 ? std::uint64_t{0} : h.counts[i - 1];
        if (static_cast<double>(h.counts[i]) >= rank && h.counts[i] > below) {
            const double lower = i == 0 ? 0.0 : bounds[i - 1];
            const auto in_bucket = static_cast<double>(h.counts[i] - below);
            return lower + (bounds[i] - lower) * (rank - static_cast<double>(below)) / in_bucket;
        }
    }
    return bounds.back();
}

std::array<std::uint64_t, 10> count_by_priority(const std::vector<std::string>& names) {
    std::array<std::uint64_t, 10> out{};
    for (const auto& n : names) {
        const auto p = protocol::task_id_priority(n);
        if (!p || *p < 0 || *p > 9) {
            continue;
        }
        const auto bundled = protocol::bundle_size(n);
        out[static_cast<std::size_t>(*p)] += bundled == 0 ? 1 : bundled;
    }
    return out;
}

failure_log::failure_log(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

void failure_log::add(std::string id, protocol::task_result r) {
    if (r.state == protocol::task_state::succeeded) {
        return;
    }
    if (std::any_of(entries_.begin(), entries_.end(), [&id](const failure_entry& e) {
            return e.id == id;
        })) {
        return;
    }
    const auto at = std::find_if(entries_.begin(), entries_.end(), [&r](const failure_entry& e) {
        return e.result.finished_ms < r.finished_ms;
    });
    entries_.insert(at, failure_entry{std::move(id), std::move(r)});
    while (entries_.size() > capacity_) {
        entries_.pop_back();
    }
}

json::value failure_log::to_json() const {
    json::array out;
    for (const auto& e : entries_) {
        json::object o;
        o["id"] = e.id;
        o["state"] = protocol::to_string(e.result.state);
        if (!e.result.worker.empty()) {
            o["worker"] = e.result.worker;
        }
        if (e.result.attempt > 0) {
            o["attempt"] = e.result.attempt;
        }
        if (e.result.finished_ms > 0) {
            o["finished_ms"] = e.result.finished_ms;
        }
        if (e.result.error) {
            o["error"] =
                json::object{{"code", e.result.error->code}, {"message", e.result.error->message}};
        }
        out.push_back(std::move(o));
    }
    return out;
}

std::vector<std::string> new_results(
    const std::vector<std::string>& before, const std::vector<std::string>& now, std::size_t limit
) {
    std::vector<std::string> fresh;
    std::set_difference(
        now.begin(), now.end(), before.begin(), before.end(), std::back_inserter(fresh)
    );
    std::stable_sort(fresh.begin(), fresh.end(), [](const std::string& a, const std::string& b) {
        return id_time(a) > id_time(b);
    });
    if (fresh.size() > limit) {
        fresh.resize(limit);
    }
    return fresh;
}

std::optional<std::int64_t> earliest_id_time(const std::vector<std::string>& names) {
    std::optional<std::int64_t> best;
    for (const auto& n : names) {
        if (!protocol::is_valid_task_id(n)) {
            continue;
        }
        if (const auto t = protocol::task_id_ms(n); t && (!best || *t < *best)) {
            best = t;
        }
    }
    return best;
}

json::value jobs_json(const roles::node_stats& s) {
    const bool master = s.queue_depth >= 0;
    const auto& m = s.master_totals;
    const auto& sc = s.schedules;
    const auto& wf = s.workflows;
    json::object out;
    out["retried"] = s.worker.retried;
    out["delayed"] = master ? json::value(m.delayed) : json::value(nullptr);
    out["delayed_next_due_ms"] = master && m.delayed_next_due_ms > 0
                                     ? json::value(m.delayed_next_due_ms)
                                     : json::value(nullptr);
    out["released"] = m.released;
    json::object schedules{
        {"fired", sc.fired},     {"late", sc.late},     {"lateness_ms_sum", sc.lateness_ms_sum},
        {"skipped", sc.skipped}, {"missed", sc.missed},
    };
    schedules["count"] = master ? json::value(sc.schedules) : json::value(nullptr);
    schedules["paused"] = master ? json::value(sc.paused) : json::value(nullptr);
    schedules["last_lateness_ms"] = master && sc.last_lateness_ms >= 0
                                        ? json::value(sc.last_lateness_ms)
                                        : json::value(nullptr);
    out["schedules"] = std::move(schedules);
    json::object workflows{{"launched", wf.launched}, {"finished", wf.finished}};
    if (master) {
        json::object by_state;
        for (std::size_t i = 0; i < roles::workflow_statuses.size(); ++i) {
            by_state[workflow::to_string(roles::workflow_statuses[i])] = wf.workflows[i];
        }
        json::object steps;
        for (std::size_t i = 0; i < roles::step_statuses.size(); ++i) {
            steps[workflow::to_string(roles::step_statuses[i])] = wf.steps[i];
        }
        workflows["by_state"] = std::move(by_state);
        workflows["steps"] = std::move(steps);
    } else {
        workflows["by_state"] = nullptr;
        workflows["steps"] = nullptr;
    }
    out["workflows"] = std::move(workflows);
    return out;
}

json::value node_json(const roles::node_stats& s) {
    const auto& m = s.master_totals;
    return json::object{
        {"member", s.member},
        {"session", zkco::to_string(s.session)},
        {"sessions", s.sessions},
        {"master", s.master},
        {"epoch", s.epoch},
        {"elected", s.elected},
        {"queue_depth", s.queue_depth >= 0 ? json::value(s.queue_depth) : json::value(nullptr)},
        {"worker",
         json::object{
             {"started", s.worker.started},
             {"published", s.worker.published},
             {"discarded", s.worker.discarded},
             {"succeeded", s.succeeded},
             {"failed", s.failed},
             {"timed_out", s.timed_out},
             {"cancelled", s.cancelled},
         }},
        {"master_totals",
         json::object{
             {"assigned", m.assigned},
             {"requeued", m.requeued},
             {"lost", m.lost},
             {"rejected", m.rejected},
             {"cancelled", m.cancelled},
             {"finished", m.finished},
         }},
        {"jobs", jobs_json(s)},
    };
}

}  // namespace zkd::http
