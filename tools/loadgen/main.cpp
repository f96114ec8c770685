// SPDX-License-Identifier: MIT
// zkd-loadgen: drives a running zkd cluster through the client library and reports
// throughput, latency, errors and ZooKeeper requests per task; optionally the server's raw
// ceiling (pipelined creates/s, multi/s) in the same run. See --help.
#include "loadgen/driver.hpp"
#include "loadgen/mntr.hpp"
#include "loadgen/options.hpp"
#include "loadgen/raw.hpp"
#include "loadgen/report.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "roles/client/inspect.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sys/resource.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using zkd::loadgen::settings;

namespace {

/// Where the run is, for the signal handler: a first signal finishes the load (or the run
/// between phases), a second one aborts it.
struct run_state {
    zkd::loadgen::load_runner* runner = nullptr;
    int signals = 0;
    /// The load's runner, kept until the event loop has stopped. A run stopped with submits
    /// still queued in the task client's batcher (its session lost) leaves handlers there
    /// that use the client when the batcher is destroyed and aborts them; destroyed after
    /// ioc.run() has returned, the batcher's aborted handlers are dropped, never run.
    std::unique_ptr<zkd::loadgen::load_runner> done_runner;
};

/// Workers (under /workers) that serve `type` with at least one slot: count and slots.
struct worker_census {
    std::uint64_t workers = 0;   ///< all workers
    std::uint64_t serving = 0;   ///< those serving the type with capacity > 0
    std::uint64_t capacity = 0;  ///< their slots
};

asio::awaitable<zkd::zkco::result<worker_census>> census(zkd::zkco::client& zk, std::string type) {
    auto kids = co_await zk.get_children(zkd::protocol::layout::workers_dir());
    if (!kids) {
        co_return kids.error();
    }
    worker_census c;
    for (const auto& name : kids->names) {
        ++c.workers;
        auto node = co_await zk.get(zkd::protocol::layout::worker(name));
        if (!node) {
            continue;  // gone meanwhile
        }
        auto info = zkd::protocol::decode_worker(node->data);
        if (!info || info->capacity.value_or(0) <= 0) {
            continue;
        }
        if (std::find(info->types.begin(), info->types.end(), type) != info->types.end()) {
            ++c.serving;
            c.capacity += static_cast<std::uint64_t>(*info->capacity);
        }
    }
    co_return c;
}

/// Waits (by watch) up to `limit` for `min_workers` workers serving `type`.
asio::awaitable<zkd::zkco::result<worker_census>> wait_for_workers(
    zkd::zkco::client& zk,
    std::string type,
    std::uint64_t min_workers,
    std::chrono::milliseconds limit
) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto w = co_await zk.watch_children(zkd::protocol::layout::workers_dir());
        if (!w) {
            co_return w.error();
        }
        auto c = co_await census(zk, type);
        if (!c || c->serving >= min_workers) {
            co_return c;
        }
        const auto left = until - std::chrono::steady_clock::now();
        if (left <= 0s) {
            co_return c;
        }
        // A worker's node may change without a child event; look again every second.
        auto ev = co_await zkd::zkco::with_timeout(
            w->watch.changed(), std::min<std::chrono::steady_clock::duration>(left, 1s)
        );
        if (!ev && ev.error() == zkd::zkco::condition::session_lost) {
            co_return ev.error();
        }
    }
}

enum class presence { absent, present };

/// Waits (by watch) until `until` for `path` (the cluster's /meta: there is a cluster; the
/// last of its fixed nodes: its first `zkd run` has set it up).
asio::awaitable<zkd::zkco::result<presence>> wait_for_node(
    zkd::zkco::client& zk, std::string path, std::chrono::steady_clock::time_point until
) {
    for (;;) {
        auto w = co_await zk.watch_exists(path);
        if (!w) {
            co_return w.error();
        }
        if (w->value) {
            co_return presence::present;
        }
        const auto left = until - std::chrono::steady_clock::now();
        if (left <= 0s) {
            co_return presence::absent;
        }
        auto ev = co_await zkd::zkco::with_timeout(w->watch.changed(), left);
        if (!ev && ev.error() == zkd::zkco::condition::session_lost) {
            co_return ev.error();
        }
    }
}

std::string scratch_name() {
    std::random_device rd;
    char buf[64];
    std::snprintf(
        buf, sizeof buf, "/zkd-loadgen-raw-%ld-%08x", static_cast<long>(::getpid()),
        static_cast<unsigned>(rd())
    );
    return buf;
}

/// The size of one task as submitted, for the raw ceiling's default node size.
std::size_t encoded_task_size(const settings& s) {
    zkd::protocol::task_spec spec;
    spec.type = s.kind.type;
    spec.args = zkd::loadgen::task_args(s.kind, s.payload);
    spec.priority = s.priority;
    spec.timeout = s.task_timeout;
    spec.max_attempts = s.max_attempts;
    spec.submitted_ms = zkd::protocol::now_ms();
    spec.client = "00000000";
    return zkd::protocol::encode(spec).size();
}

void write_cdf(const std::string& file, const zkd::loadgen::log_histogram& h) {
    std::ofstream out(file);
    out << "# latency_ms cumulative_fraction\n";
    for (const auto& [us, fraction] : h.cdf()) {
        out << static_cast<double>(us) / 1000.0 << ' ' << fraction << '\n';
    }
    if (!out) {
        std::fprintf(stderr, "zkd-loadgen: cannot write %s\n", file.c_str());
    }
}

void write_trace(const std::string& file, const std::vector<zkd::loadgen::task_trace>& rows) {
    std::ofstream out(file);
    out << "# due_ms latency_ms started_ms finished_ms worker\n";
    for (const auto& r : rows) {
        out << zkd::loadgen::trace_line(r) << '\n';
    }
    if (!out) {
        std::fprintf(stderr, "zkd-loadgen: cannot write %s\n", file.c_str());
    }
}

asio::awaitable<void> measure_ceiling(settings s, zkd::loadgen::run_report& rep) {
    zkd::zkco::config cfg;
    cfg.connect_string = s.zk;
    cfg.session_timeout = s.session_timeout;
    cfg.auth = s.auth;
    zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
    auto c = co_await zkd::zkco::with_timeout(zk.connect(), s.connect_timeout);
    if (!c) {
        rep.raw_error = "connect: " + c.error().message();
        co_await zk.close();
        co_return;
    }
    zkd::loadgen::raw_settings rs;
    rs.ops = s.raw_ops;
    rs.window = s.raw_window;
    rs.batch = s.raw_batch;
    rs.rounds = s.raw_rounds;
    rs.warmup = s.raw_warmup;
    rs.payload = s.raw_payload.value_or(encoded_task_size(s));
    auto m = co_await zkd::loadgen::measure_raw(zk, rs, scratch_name());
    if (m.value) {
        rep.raw = *m.value;
    } else {
        rep.raw_error = m.error;
    }
    co_await zk.close();
}

asio::awaitable<void> run(settings s, zkd::loadgen::run_report& rep, run_state& state) {
    using zkd::loadgen::exit_errors;
    using zkd::loadgen::exit_no_workers;
    using zkd::loadgen::exit_stalled;
    using zkd::loadgen::exit_unreachable;
    const auto chroot = zkd::protocol::chroot_path(s.ns);
    zkd::zkco::config cfg;
    cfg.connect_string = s.zk + chroot;
    cfg.session_timeout = s.session_timeout;
    cfg.auth = s.auth;
    zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
    auto c = co_await zkd::zkco::with_timeout(zk.connect(), s.connect_timeout);
    if (!c) {
        rep.exit = exit_unreachable;
        rep.message = "cannot reach ZooKeeper at " + s.zk + " within " +
                      std::to_string(s.connect_timeout.count()) + " ms: " + c.error().message();
        co_await zk.close();
        co_return;
    }

    if (zk.negotiated_timeout() != s.session_timeout) {
        std::fprintf(
            stderr, "zkd-loadgen: the server granted a session timeout of %lld ms (asked %lld)\n",
            static_cast<long long>(zk.negotiated_timeout().count()),
            static_cast<long long>(s.session_timeout.count())
        );
    }
    std::optional<zkd::protocol::layout> layout;
    worker_census workers;
    if (s.load) {
        const auto until = std::chrono::steady_clock::now() + s.wait_workers;
        auto meta = co_await wait_for_node(zk, zkd::protocol::layout::meta(), until);
        if (!meta || *meta == presence::absent) {
            rep.exit = meta ? exit_no_workers : exit_errors;
            rep.message = meta ? "no zkd cluster in " + chroot + " (no " + chroot +
                                     "/meta after waiting " +
                                     std::to_string(s.wait_workers.count()) +
                                     " ms: start `zkd run --namespace " + s.ns + "` first)"
                               : "read " + chroot + "/meta: " + meta.error().message();
            co_await zk.close();
            co_return;
        }
        auto l = co_await zkd::roles::read_layout(zk);  // a load never makes a cluster
        if (!l) {
            rep.exit = exit_errors;
            rep.message = "no usable cluster in " + chroot + ": " + l.error().message();
            co_await zk.close();
            co_return;
        }
        // The first `zkd run` creates /meta, then the other fixed nodes, the shards last.
        auto set_up = co_await wait_for_node(zk, l->fixed_nodes().back(), until);
        if (!set_up || *set_up == presence::absent) {
            rep.exit = set_up ? exit_no_workers : exit_errors;
            rep.message = set_up ? "the cluster in " + chroot + " is not set up (no " + chroot +
                                       l->fixed_nodes().back() + " after waiting " +
                                       std::to_string(s.wait_workers.count()) + " ms)"
                                 : "read " + chroot + ": " + set_up.error().message();
            co_await zk.close();
            co_return;
        }
        layout = *l;
        if (s.require_workers) {
            auto found = co_await wait_for_workers(zk, s.kind.type, s.min_workers, s.wait_workers);
            if (!found) {
                rep.exit = exit_errors;
                rep.message = "reading /workers: " + found.error().message();
                co_await zk.close();
                co_return;
            }
            if (found->serving > 0 && found->serving < s.min_workers) {
                rep.exit = exit_no_workers;
                rep.message = "only " + std::to_string(found->serving) + " of the " +
                              std::to_string(s.min_workers) +
                              " workers asked for (--workers) serve '" + s.kind.type + "' in " +
                              chroot + " after waiting " + std::to_string(s.wait_workers.count()) +
                              " ms";
                co_await zk.close();
                co_return;
            }
            if (found->serving == 0) {
                rep.exit = exit_no_workers;
                rep.message = found->workers == 0
                                  ? "no workers in " + chroot + " (nothing under " + chroot +
                                        "/workers) after waiting " +
                                        std::to_string(s.wait_workers.count()) + " ms"
                                  : "none of the " + std::to_string(found->workers) +
                                        " workers in " + chroot + " serves task type '" +
                                        s.kind.type + "' with a free slot after waiting " +
                                        std::to_string(s.wait_workers.count()) + " ms";
                co_await zk.close();
                co_return;
            }
            workers = *found;
        } else {
            auto found = co_await census(zk, s.kind.type);
            if (found) {
                workers = *found;
            }
        }
    }

    if (s.raw && state.signals == 0) {
        co_await measure_ceiling(s, rep);
        if (!rep.raw) {
            rep.exit = exit_errors;
        }
    }

    if (s.load && state.signals == 0) {
        const auto parts = zkd::zkco::parse_connect_string(s.zk);
        std::optional<zkd::loadgen::zk_counts> before;
        std::string mntr_error;
        if (s.mntr) {
            auto snap = co_await zkd::loadgen::snapshot(parts->servers, 5s);
            before = snap.value;
            mntr_error = snap.error;
        }
        const auto counters_before = zk.counters();
        state.done_runner = std::make_unique<zkd::loadgen::load_runner>(zk, *layout, s);
        auto& runner = *state.done_runner;
        state.runner = &runner;
        auto load = co_await runner.run();
        state.runner = nullptr;
        const auto counters_after = zk.counters();
        load.client.reads = counters_after.reads - counters_before.reads;
        load.client.writes = counters_after.writes - counters_before.writes;
        load.client.write_ops = counters_after.write_ops - counters_before.write_ops;
        load.client.multis = counters_after.multis - counters_before.multis;
        load.client.watches = counters_after.watches - counters_before.watches;
        if (s.mntr && before) {
            auto snap = co_await zkd::loadgen::snapshot(parts->servers, 5s);
            if (snap.value) {
                load.zk = *snap.value - *before;
            } else {
                mntr_error = snap.error;
            }
        }
        load.mntr_error = mntr_error;
        load.workers = workers.serving;
        load.capacity = workers.capacity;
        load.interrupted = state.signals > 0;
        if (load.session_lost) {
            rep.exit = exit_unreachable;
            rep.message = "lost ZooKeeper at " + s.zk + ": the session " +
                          std::string(zkd::zkco::to_string(zk.state())) +
                          " (the servers were unreachable for longer than the " +
                          std::to_string(zk.negotiated_timeout().count()) +
                          " ms session timeout, or ended the session); " +
                          std::to_string(load.submitted) + " tasks submitted, " +
                          std::to_string(load.results) + " results, " +
                          std::to_string(load.errors.unfinished) + " unfinished";
        } else if (load.stalled) {
            rep.exit = exit_stalled;
            rep.message = "no result for " + std::to_string(s.stall_timeout.count()) +
                          " ms while " + std::to_string(load.errors.unfinished) +
                          " tasks were in flight";
        } else if (load.errors.total() > 0 || load.session_lost || load.interrupted) {
            rep.exit = exit_errors;
        }
        if (!s.cdf_file.empty()) {
            write_cdf(s.cdf_file, load.latency_us);
        }
        if (!s.trace_file.empty()) {
            write_trace(s.trace_file, load.trace);
            load.trace.clear();
        }
        rep.load = std::move(load);
    } else if (state.signals > 0) {
        rep.exit = exit_errors;
        rep.message = "interrupted";
    }
    co_await zk.close();
}

}  // namespace

int main(int argc, char** argv) {
    // The libraries' warnings (a session reconnecting) go to stderr: stdout holds the report
    // (--json), which a log line must not corrupt.
    spdlog::set_default_logger(spdlog::stderr_logger_mt("zkd-loadgen"));
    spdlog::set_level(spdlog::level::warn);
    spdlog::cfg::load_env_levels();
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "--version") {
        std::printf("zkd-loadgen %s\n", ZKD_VERSION);
        return 0;
    }
    zkd::loadgen::parsed_args parsed;
    try {
        parsed = zkd::loadgen::parse_args(args, [](const char* name) -> std::optional<std::string> {
            if (const char* v = std::getenv(name)) {  // NOLINT(concurrency-mt-unsafe)
                return std::string(v);
            }
            return std::nullopt;
        });
    } catch (const zkd::loadgen::usage_error& e) {
        std::fprintf(stderr, "zkd-loadgen: %s\n(see 'zkd-loadgen --help')\n", e.what());
        return zkd::loadgen::exit_usage;
    }
    if (parsed.help) {
        std::fputs(zkd::loadgen::help_text(), stdout);
        return zkd::loadgen::exit_ok;
    }
    const settings s = parsed.s;

    asio::io_context ioc(1);
    zkd::loadgen::run_report rep;
    rep.s = s;
    run_state state;
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    std::function<void()> arm = [&] {
        signals.async_wait([&](const boost::system::error_code& ec, int) {
            if (ec) {
                return;
            }
            ++state.signals;
            if (state.runner != nullptr) {
                if (state.signals == 1) {
                    std::fprintf(
                        stderr,
                        "\nzkd-loadgen: stopping: waiting for the %llu tasks in "
                        "flight (again to stop at once)\n",
                        static_cast<unsigned long long>(state.runner->in_flight())
                    );
                    state.runner->finish();
                } else {
                    state.runner->abort();
                }
            } else if (state.signals > 1) {
                std::_Exit(zkd::loadgen::exit_errors);
            }
            arm();
        });
    };
    arm();
    bool done = false;
    asio::co_spawn(ioc, run(s, rep, state), [&](const std::exception_ptr& e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                rep.exit = zkd::loadgen::exit_errors;
                rep.message = std::string("unexpected: ") + ex.what();
            }
        }
        done = true;
        signals.cancel();
    });
    ioc.run();
    if (!done) {
        rep.exit = zkd::loadgen::exit_errors;
        rep.message = "the run did not finish";
    }
    rusage ru{};
    if (::getrusage(RUSAGE_SELF, &ru) == 0) {
        const auto secs = [](const timeval& tv) {
            return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
        };
        rep.usage.user_s = secs(ru.ru_utime);
        rep.usage.sys_s = secs(ru.ru_stime);
        rep.usage.max_rss_kb = ru.ru_maxrss;
    }
    if (s.json) {
        std::printf("%s\n", zkd::protocol::to_text(zkd::loadgen::to_json(rep)).c_str());
    } else {
        if (rep.raw || rep.load || !rep.raw_error.empty()) {
            std::fputs(zkd::loadgen::to_text(rep).c_str(), stdout);
        }
    }
    if (!rep.message.empty()) {
        std::fprintf(stderr, "zkd-loadgen: %s\n", rep.message.c_str());
    }
    return rep.exit;
}
