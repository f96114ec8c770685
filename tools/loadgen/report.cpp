// SPDX-License-Identifier: MIT
#include "loadgen/report.hpp"

#include <boost/json/array.hpp>

#include <cmath>
#include <cstdio>

namespace json = boost::json;

namespace zkd::loadgen {

namespace {

double ms(std::uint64_t us) {
    return static_cast<double>(us) / 1000.0;
}

/// Rounded to 3 decimals, so JSON and text do not carry float noise.
double round3(double x) {
    return std::round(x * 1000.0) / 1000.0;
}

double per(std::uint64_t n, std::uint64_t tasks) {
    return tasks == 0 ? 0.0 : round3(static_cast<double>(n) / static_cast<double>(tasks));
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

/// 12345.6 -> "12,346".
std::string grouped(double v) {
    const auto n = static_cast<long long>(std::llround(v));
    std::string digits = std::to_string(n < 0 ? -n : n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) {
            out += ',';
        }
        out += digits[i];
    }
    return n < 0 ? "-" + out : out;
}

std::string task_spec_text(const settings& s) {
    if (s.kind.args) {
        return s.kind.type;
    }
    return s.kind.type == "echo" ? "echo" : s.kind.type + ":" + std::to_string(s.kind.ms);
}

}  // namespace

json::object latency_json(const log_histogram& h) {
    json::object o;
    o["count"] = h.count();
    o["min"] = round3(ms(h.min()));
    o["mean"] = round3(h.mean() / 1000.0);
    o["p50"] = round3(ms(h.value_at(0.50)));
    o["p90"] = round3(ms(h.value_at(0.90)));
    o["p99"] = round3(ms(h.value_at(0.99)));
    o["p999"] = round3(ms(h.value_at(0.999)));
    o["max"] = round3(ms(h.max()));
    return o;
}

json::object to_json(const run_report& r) {
    const settings& s = r.s;
    json::object o;
    o["v"] = 1;
    o["zk"] = s.zk;
    o["namespace"] = s.ns;
    o["exit"] = r.exit;
    if (!r.message.empty()) {
        o["message"] = r.message;
    }
    json::object cfg;
    cfg["mode"] = s.rate ? "open" : "closed";
    cfg["tasks"] = s.tasks ? json::value(*s.tasks) : json::value(nullptr);
    cfg["duration_s"] = s.duration ? json::value(static_cast<double>(s.duration->count()) / 1000.0)
                                   : json::value(nullptr);
    cfg["concurrency"] = s.rate ? json::value(nullptr) : json::value(s.concurrency);
    cfg["rate"] = s.rate ? json::value(*s.rate) : json::value(nullptr);
    cfg["task"] = task_spec_text(s);
    cfg["payload"] = s.payload;
    cfg["batch"] = s.batch;
    cfg["bundle"] = s.bundle;
    cfg["auto_bundle"] = s.auto_bundle;
    cfg["submit_only"] = s.submit_only;
    o["config"] = std::move(cfg);

    if (r.raw) {
        const auto& raw = *r.raw;
        json::object j;
        j["creates_per_s"] = std::llround(raw.creates_per_s);
        j["multis_per_s"] = std::llround(raw.multis_per_s);
        j["creates_in_multis_per_s"] = std::llround(raw.creates_in_multis_per_s());
        j["batch"] = raw.settings.batch;
        j["window"] = raw.settings.window;
        j["ops"] = raw.settings.ops;
        j["payload"] = raw.settings.payload;
        json::array rounds;
        for (std::size_t i = 0; i < raw.create_rounds.size(); ++i) {
            json::object round;
            round["creates_per_s"] = std::llround(raw.create_rounds[i]);
            round["multis_per_s"] =
                std::llround(i < raw.multi_rounds.size() ? raw.multi_rounds[i] : 0.0);
            rounds.push_back(std::move(round));
        }
        j["rounds"] = std::move(rounds);
        o["raw"] = std::move(j);
    } else if (!r.raw_error.empty()) {
        o["raw_error"] = r.raw_error;
    }

    if (r.load) {
        const auto& l = *r.load;
        const std::uint64_t tasks = s.submit_only ? l.submitted : l.results;
        json::object j;
        j["workers"] = l.workers;
        j["capacity"] = l.capacity;
        j["submitted"] = l.submitted;
        j["results"] = l.results;
        j["succeeded"] = l.succeeded;
        j["elapsed_s"] = round3(l.elapsed_s);
        j["submit_s"] = round3(l.submit_s);
        j["tasks_per_s"] = std::round(l.tasks_per_s(s.submit_only) * 10.0) / 10.0;
        j["latency_ms"] = latency_json(l.latency_us);
        j["submit_ms"] = latency_json(l.submit_us);
        json::object stages;
        stages["to_start"] = latency_json(l.to_start_us);
        stages["run"] = latency_json(l.run_us);
        stages["to_result"] = latency_json(l.to_result_us);
        j["stages_ms"] = std::move(stages);
        j["schedule_lag_max_ms"] = round3(l.schedule_lag_max_ms);
        j["queue_full"] = l.queue_full;
        const auto& e = l.errors;
        json::object errors;
        errors["total"] = e.total();
        errors["failed"] = e.failed;
        errors["timed_out"] = e.timed_out;
        errors["cancelled"] = e.cancelled;
        errors["lost"] = e.lost;
        errors["wrong_result"] = e.wrong_result;
        errors["garbage_result"] = e.garbage_result;
        errors["submit"] = e.submit;
        errors["session"] = e.session;
        errors["wait"] = e.wait;
        errors["unfinished"] = e.unfinished;
        j["errors"] = std::move(errors);
        j["stalled"] = l.stalled;
        j["interrupted"] = l.interrupted;
        j["session_lost"] = l.session_lost;
        if (l.zk) {
            json::object z;
            z["source"] = "mntr";
            z["writes"] = l.zk->writes;
            z["reads"] = l.zk->reads;
            z["packets_received"] = l.zk->packets_received;
            z["writes_per_task"] = per(l.zk->writes, tasks);
            z["reads_per_task"] = per(l.zk->reads, tasks);
            j["zookeeper"] = std::move(z);
        } else {
            j["zookeeper"] = nullptr;
            if (s.mntr) {
                j["mntr_error"] = l.mntr_error;
            }
        }
        json::object c;
        c["reads"] = l.client.reads;
        c["writes"] = l.client.writes;
        c["write_ops"] = l.client.write_ops;
        c["multis"] = l.client.multis;
        c["watches"] = l.client.watches;
        c["results_listings"] = l.results_listings;
        c["direct"] = l.direct;
        c["auto_bundled"] = l.auto_bundled;
        c["reads_per_task"] = per(l.client.reads, tasks);
        c["writes_per_task"] = per(l.client.writes, tasks);
        c["write_ops_per_task"] = per(l.client.write_ops, tasks);
        c["results_listings_per_task"] = per(l.results_listings, tasks);
        c["direct_per_task"] = per(l.direct, tasks);
        c["auto_bundled_per_task"] = per(l.auto_bundled, tasks);
        j["client"] = std::move(c);
        o["load"] = std::move(j);
        if (r.raw && r.raw->creates_per_s > 0) {
            o["tasks_per_raw_create"] = round3(l.tasks_per_s(s.submit_only) / r.raw->creates_per_s);
        }
    }
    json::object p;
    p["cpu_user_s"] = round3(r.usage.user_s);
    p["cpu_sys_s"] = round3(r.usage.sys_s);
    p["max_rss_kb"] = r.usage.max_rss_kb;
    o["process"] = std::move(p);
    return o;
}

std::string trace_line(const task_trace& t) {
    std::string worker = t.worker.empty() ? "-" : t.worker;
    for (auto& ch : worker) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c == 0x7f) {
            ch = '_';
        }
    }
    return fmt("%.3f", t.due_ms) + ' ' + fmt("%.3f", t.latency_ms) + ' ' +
           std::to_string(t.started_ms) + ' ' + std::to_string(t.finished_ms) + ' ' + worker;
}

std::string to_text(const run_report& r) {
    const settings& s = r.s;
    std::string t;
    t += "zkd-loadgen: " + s.zk + ", namespace " + s.ns + "\n";
    if (r.raw) {
        const auto& raw = *r.raw;
        t += "raw ceiling (zkco, " + std::to_string(raw.settings.payload) + "-byte nodes, window " +
             std::to_string(raw.settings.window) + ", medians of " +
             std::to_string(raw.create_rounds.size()) + " rounds):\n";
        t += "  creates/s            " + grouped(raw.creates_per_s) + "\n";
        t += "  multi/s (" + std::to_string(raw.settings.batch) + " creates) " +
             grouped(raw.multis_per_s) + "  (" + grouped(raw.creates_in_multis_per_s()) +
             " creates/s)\n";
    } else if (!r.raw_error.empty()) {
        t += "raw ceiling: failed: " + r.raw_error + "\n";
    }
    if (r.load) {
        const auto& l = *r.load;
        const std::uint64_t tasks = s.submit_only ? l.submitted : l.results;
        std::string mode = s.rate ? "open loop, " + fmt("%.1f", *s.rate) + " tasks/s"
                                  : "closed loop, concurrency " + std::to_string(s.concurrency);
        t +=
            "load: " + task_spec_text(s) + ", payload " + std::to_string(s.payload) + " B, batch " +
            std::to_string(s.batch) +
            (s.bundle > 1 ? ", bundle " + std::to_string(s.bundle) : std::string()) +
            (s.auto_bundle > 1 ? ", auto-bundle " + std::to_string(s.auto_bundle) : std::string()) +
            ", " + mode + "; " + std::to_string(l.workers) + " workers, " +
            std::to_string(l.capacity) + " slots\n";
        t += "  submitted " + grouped(static_cast<double>(l.submitted)) + ", results " +
             grouped(static_cast<double>(l.results)) + ", succeeded " +
             grouped(static_cast<double>(l.succeeded)) + " in " + fmt("%.2f", l.elapsed_s) + " s\n";
        t += "  tasks/s              " + grouped(l.tasks_per_s(s.submit_only)) + "\n";
        if (r.raw && r.raw->creates_per_s > 0) {
            t += "  tasks/s / raw creates/s  " +
                 fmt("%.2f", l.tasks_per_s(s.submit_only) / r.raw->creates_per_s) + "\n";
        }
        if (!s.submit_only) {
            const auto& h = l.latency_us;
            t += "  latency ms (submit -> result): p50 " + fmt("%.3f", ms(h.value_at(0.5))) +
                 "  p90 " + fmt("%.3f", ms(h.value_at(0.9))) + "  p99 " +
                 fmt("%.3f", ms(h.value_at(0.99))) + "  p99.9 " +
                 fmt("%.3f", ms(h.value_at(0.999))) + "  max " + fmt("%.3f", ms(h.max())) + "\n";
            if (l.run_us.count() > 0) {
                const auto stage = [](const log_histogram& g) {
                    return "p50 " + fmt("%.0f", ms(g.value_at(0.5))) + "  p99 " +
                           fmt("%.0f", ms(g.value_at(0.99))) + "  max " + fmt("%.0f", ms(g.max()));
                };
                t += "  stages ms (whole ms, the worker's clock): to start " +
                     stage(l.to_start_us) + " | run " + stage(l.run_us) + " | to result " +
                     stage(l.to_result_us) + "\n";
            }
        }
        const auto& sh = l.submit_us;
        t += "  submit() ms: p50 " + fmt("%.3f", ms(sh.value_at(0.5))) + "  p99 " +
             fmt("%.3f", ms(sh.value_at(0.99))) + "  max " + fmt("%.3f", ms(sh.max())) + "\n";
        if (s.rate) {
            t += "  behind schedule at most " + fmt("%.1f", l.schedule_lag_max_ms) + " ms\n";
        }
        if (l.queue_full > 0) {
            t += "  queue full: " + std::to_string(l.queue_full) +
                 " submit calls refused (zkd run --max-pending), each tried again after a "
                 "pause\n";
        }
        const auto& e = l.errors;
        t += "  errors " + std::to_string(e.total());
        if (e.total() > 0) {
            t += ": failed " + std::to_string(e.failed) + ", timed out " +
                 std::to_string(e.timed_out) + ", cancelled " + std::to_string(e.cancelled) +
                 ", lost " + std::to_string(e.lost) + ", wrong result " +
                 std::to_string(e.wrong_result) + ", garbage result " +
                 std::to_string(e.garbage_result) + ", submit " + std::to_string(e.submit) +
                 ", session " + std::to_string(e.session) + ", wait " + std::to_string(e.wait) +
                 ", unfinished " + std::to_string(e.unfinished);
        }
        t += "\n";
        if (l.zk) {
            t += "  ZooKeeper (mntr, all clients): " + fmt("%.2f", per(l.zk->writes, tasks)) +
                 " writes/task, " + fmt("%.2f", per(l.zk->reads, tasks)) + " reads/task (" +
                 std::to_string(l.zk->writes) + " writes, " + std::to_string(l.zk->reads) +
                 " reads)\n";
        } else if (s.mntr) {
            t += "  ZooKeeper counters unavailable: " + l.mntr_error + "\n";
        }
        t += "  this client: " + fmt("%.2f", per(l.client.writes, tasks)) +
             " write transactions/task (" + fmt("%.2f", per(l.client.write_ops, tasks)) +
             " ops), " + fmt("%.2f", per(l.client.reads, tasks)) + " reads/task (" +
             fmt("%.3f", per(l.results_listings, tasks)) + " listings of its results directory), " +
             std::to_string(l.client.multis) + " multis; " + fmt("%.2f", per(l.direct, tasks)) +
             " of the tasks placed on workers directly, " +
             fmt("%.2f", per(l.auto_bundled, tasks)) + " in automatic bundles\n";
        if (l.stalled) {
            t += "  STALLED: no result for " + std::to_string(s.stall_timeout.count()) + " ms\n";
        }
        if (l.interrupted) {
            t += "  interrupted by a signal\n";
        }
        t += "  zkd-loadgen itself: " + fmt("%.2f", r.usage.user_s) + " s user, " +
             fmt("%.2f", r.usage.sys_s) + " s system CPU\n";
        if (l.session_lost) {
            t += "  the session was lost\n";
        }
    }
    return t;
}

}  // namespace zkd::loadgen
