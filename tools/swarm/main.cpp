// SPDX-License-Identifier: MIT
// zkd-swarm: many zkd workers in one process, one ZooKeeper session each, all on one event
// loop: the real worker (roles::run_worker) with task types that wait on timers, so that a
// master and clients can be measured against a thousand workers on a small machine. See
// --help.
#include "handlers/registry.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/event.hpp"
#include "reactor/task_group.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/worker/worker.hpp"
#include "swarm/options.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <stop_token>
#include <string>
#include <unistd.h>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using zkd::swarm::settings;

namespace {

/// Resident memory of this process, bytes (0 if /proc cannot say).
std::uint64_t rss_bytes() {
    std::ifstream in("/proc/self/statm");
    std::uint64_t size = 0;
    std::uint64_t resident = 0;
    if (!(in >> size >> resident)) {
        return 0;
    }
    return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

/// Waits `d` or until `stop` is requested: false when stopped.
asio::awaitable<bool> wait_unless_stopped(std::chrono::milliseconds d, std::stop_token stop) {
    const auto ex = co_await asio::this_coro::executor;
    auto timer = std::make_shared<asio::steady_timer>(ex, d);
    const std::stop_callback on_stop(stop, [timer] {
        asio::post(timer->get_executor(), [timer] { timer->cancel(); });
    });
    co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
    co_return !stop.stop_requested();
}

/// The task types the swarm's workers serve: echo (after --task-ms plus jitter) and sleep,
/// both on the event loop, no compute thread held.
void add_types(zkd::handlers::registry& reg, const settings& s) {
    auto rng = std::make_shared<std::minstd_rand>(std::random_device{}());
    const auto base = s.task_ms;
    const auto jitter = s.task_jitter;
    reg.add_async(
        "echo",
        [rng, base,
         jitter](zkd::handlers::async_call call) -> asio::awaitable<zkd::handlers::handler_result> {
            call.started();
            auto d = base;
            if (jitter.count() > 0) {
                d += std::chrono::milliseconds(
                    std::uniform_int_distribution<std::int64_t>(0, jitter.count())(*rng)
                );
            }
            if (d.count() > 0 && !co_await wait_unless_stopped(d, call.stop)) {
                co_return zkd::handlers::handler_error{
                    std::string(zkd::protocol::codes::cancelled), "echo stopped"};
            }
            co_return call.args;
        }
    );
    reg.add_async(
        "sleep",
        [](zkd::handlers::async_call call) -> asio::awaitable<zkd::handlers::handler_result> {
            call.started();
            const json::value* ms = &call.args;
            if (const json::object* obj = call.args.if_object()) {
                ms = obj->if_contains("ms");
            }
            const auto n = ms != nullptr ? zkd::protocol::as_int64(*ms) : std::nullopt;
            if (!n || *n < 0 || *n > 86'400'000) {
                co_return zkd::handlers::handler_error{
                    std::string(zkd::protocol::codes::bad_args),
                    "sleep expects {\"ms\": n} or a bare n, 0 to 86400000"};
            }
            if (!co_await wait_unless_stopped(std::chrono::milliseconds(*n), call.stop)) {
                co_return zkd::handlers::handler_error{
                    std::string(zkd::protocol::codes::cancelled), "sleep cancelled"};
            }
            co_return json::object{{"slept_ms", *n}};
        }
    );
}

/// One worker of the swarm: its current session and what it did over all of them.
struct slot {
    std::unique_ptr<zkd::zkco::client> zk;
    zkd::roles::worker_stats stats;
    std::uint64_t sessions = 0;  ///< sessions it joined with
};

class swarm {
public:
    swarm(asio::io_context& ioc, settings s)
        : ioc_(ioc),
          s_(std::move(s)),
          pool_(1),
          drain_(ioc.get_executor()),
          stop_(ioc.get_executor()),
          group_(ioc.get_executor()) {
        add_types(reg_, s_);
        if (s_.host.empty()) {
            char name[256] = {};
            s_.host = ::gethostname(name, sizeof name - 1) == 0 ? name : "swarm";
        }
        cfg_.connect_string = s_.zk + zkd::protocol::chroot_path(s_.ns);
        cfg_.session_timeout = s_.session_timeout;
    }

    /// First signal: drain and stop. Second: stop at once.
    void signal() {
        if (!stop_.is_set()) {
            stop_.set();
        } else {
            group_.emit(asio::cancellation_type::terminal);
        }
    }

    asio::awaitable<int> run() {
        using namespace zkd::swarm;
        // One session to find the cluster, closed before the workers start.
        {
            zkd::zkco::client zk(ioc_.get_executor(), cfg_);
            auto c = co_await zkd::zkco::with_timeout(zk.connect(), s_.connect_timeout);
            if (!c) {
                std::fprintf(
                    stderr, "zkd-swarm: cannot reach ZooKeeper at %s within %lld ms: %s\n",
                    s_.zk.c_str(), static_cast<long long>(s_.connect_timeout.count()),
                    c.error().message().c_str()
                );
                co_await zk.close();
                co_return exit_unreachable;
            }
            auto l = co_await find_cluster(zk);
            co_await zk.close();
            if (!l) {
                co_return exit_no_cluster;
            }
            layout_ = *l;
        }
        rss_start_ = rss_bytes();
        const auto t0 = std::chrono::steady_clock::now();
        slots_.resize(s_.workers);
        for (auto& sl : slots_) {
            sl = std::make_unique<slot>();
        }
        group_.spawn(spawn_all(), "spawn");
        // Report once every worker has joined (or the run stops first). A worker gets
        // --connect-timeout past its turn to start.
        const auto join_by =
            t0 +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(static_cast<double>(s_.workers) / s_.connect_rate)
            ) +
            s_.connect_timeout;
        while (!stop_.is_set() && joined() < s_.workers &&
               std::chrono::steady_clock::now() < join_by) {
            co_await zkd::zkco::pause(50ms);
        }
        const auto all = joined();
        rss_joined_ = rss_bytes();
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (all == s_.workers) {
            std::printf(
                "zkd-swarm: %llu workers joined in %.1f s; rss %.1f MiB (%llu bytes per worker)\n",
                static_cast<unsigned long long>(all), took,
                static_cast<double>(rss_joined_) / (1024.0 * 1024.0),
                static_cast<unsigned long long>(per_worker())
            );
            std::fflush(stdout);
            using namespace asio::experimental::awaitable_operators;
            if (s_.duration) {
                co_await (stop_.wait() || zkd::zkco::pause(*s_.duration));
            } else {
                co_await stop_.wait();
            }
        } else if (!stop_.is_set()) {
            std::fprintf(
                stderr, "zkd-swarm: only %llu of %llu workers joined within %.1f s; stopping\n",
                static_cast<unsigned long long>(all), static_cast<unsigned long long>(s_.workers),
                took
            );
        }
        stop_.set();
        drain_.set();
        co_await group_.async_wait(asio::use_awaitable);
        summary(all, took);
        co_return all == s_.workers ? exit_ok : exit_errors;
    }

private:
    asio::awaitable<std::optional<zkd::protocol::layout>> find_cluster(zkd::zkco::client& zk) {
        const auto until = std::chrono::steady_clock::now() + s_.connect_timeout;
        for (;;) {
            auto l = co_await zkd::roles::read_layout(zk);
            if (l) {
                auto last = co_await zk.exists(l->fixed_nodes().back());
                if (last && *last) {
                    co_return *l;
                }
            }
            if (std::chrono::steady_clock::now() >= until || stop_.is_set()) {
                std::fprintf(
                    stderr,
                    "zkd-swarm: no set-up zkd cluster in %s%s within %lld ms (%s): start `zkd "
                    "run --namespace %s` first\n",
                    s_.zk.c_str(), zkd::protocol::chroot_path(s_.ns).c_str(),
                    static_cast<long long>(s_.connect_timeout.count()),
                    l ? "its shards are not made yet" : l.error().message().c_str(), s_.ns.c_str()
                );
                co_return std::nullopt;
            }
            co_await zkd::zkco::pause(200ms);
        }
    }

    /// Starts the workers at --connect-rate at most.
    asio::awaitable<void> spawn_all() {
        const auto gap = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(1.0 / s_.connect_rate)
        );
        auto next = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < slots_.size(); ++i) {
            if (stop_.is_set() || co_await zkd::zkco::cancelled()) {
                co_return;
            }
            group_.spawn(run_slot(i), "worker");
            next += gap;
            const auto now = std::chrono::steady_clock::now();
            if (next > now && !co_await zkd::zkco::pause(next - now)) {
                co_return;
            }
        }
    }

    /// Worker i, session after session, until the swarm drains.
    asio::awaitable<void> run_slot(std::size_t i) {
        co_await asio::this_coro::throw_if_cancelled(false);
        auto& sl = *slots_[i];
        const std::string host = s_.host + ".w" + std::to_string(i);
        for (;;) {
            if (drain_.is_set() || co_await zkd::zkco::cancelled()) {
                co_return;
            }
            sl.zk = std::make_unique<zkd::zkco::client>(ioc_.get_executor(), cfg_);
            auto c = co_await zkd::zkco::with_timeout(sl.zk->connect(), s_.connect_timeout);
            if (!c) {
                ++connect_failures_;
                spdlog::warn("worker {}: cannot connect: {}", host, c.error().message());
                co_await sl.zk->close();
                if (!co_await zkd::zkco::pause(1s)) {
                    co_return;
                }
                continue;
            }
            zkd::protocol::member_info me;
            me.id = zkd::protocol::new_member_id(host, ::getpid());
            me.host = host;
            me.pid = ::getpid();
            me.capacity = s_.capacity;
            me.threads = s_.threads;
            zkd::roles::worker_options opts;
            opts.drain = &drain_;
            ++sl.sessions;
            co_await zkd::roles::run_worker(*sl.zk, layout_, me, reg_, pool_, opts, &sl.stats);
            const bool done = drain_.is_set() || co_await zkd::zkco::cancelled();
            co_await sl.zk->close();
            if (done) {
                co_return;
            }
            ++lost_;
            spdlog::warn("worker {}: session lost; joining again as a new member", me.id);
            if (!co_await zkd::zkco::pause(1s)) {
                co_return;
            }
        }
    }

    /// Workers that have joined (listed their assignment directory) at least once.
    [[nodiscard]] std::uint64_t joined() const {
        return static_cast<std::uint64_t>(std::count_if(
            slots_.begin(), slots_.end(),
            [](const auto& sl) { return sl && sl->stats.listings > 0; }
        ));
    }

    [[nodiscard]] std::uint64_t per_worker() const {
        return rss_joined_ > rss_start_
                   ? (rss_joined_ - rss_start_) / std::max<std::uint64_t>(s_.workers, 1)
                   : 0;
    }

    void summary(std::uint64_t all, double join_s) const {
        std::uint64_t published = 0;
        std::uint64_t started = 0;
        std::uint64_t used = 0;
        std::uint64_t least = UINT64_MAX;
        std::uint64_t most = 0;
        for (const auto& sl : slots_) {
            published += sl->stats.published;
            started += sl->stats.started;
            used += sl->stats.published > 0 ? 1 : 0;
            least = std::min(least, sl->stats.published);
            most = std::max(most, sl->stats.published);
        }
        if (slots_.empty()) {
            least = 0;
        }
        json::object o{
            {"workers", s_.workers},
            {"joined", all},
            {"join_s", join_s},
            {"tasks_started", started},
            {"tasks_published", published},
            {"workers_used", used},
            {"least_per_worker", least},
            {"most_per_worker", most},
            {"sessions_lost", lost_},
            {"connect_failures", connect_failures_},
            {"rss_start_bytes", rss_start_},
            {"rss_joined_bytes", rss_joined_},
            {"rss_per_worker_bytes", per_worker()},
        };
        if (s_.json) {
            std::printf("%s\n", json::serialize(o).c_str());
        } else {
            std::printf(
                "zkd-swarm: %llu of %llu workers joined; %llu tasks published by %llu workers "
                "(%llu to %llu each); %llu sessions lost, %llu failed connects; %llu bytes per "
                "worker\n",
                static_cast<unsigned long long>(all), static_cast<unsigned long long>(s_.workers),
                static_cast<unsigned long long>(published), static_cast<unsigned long long>(used),
                static_cast<unsigned long long>(least), static_cast<unsigned long long>(most),
                static_cast<unsigned long long>(lost_),
                static_cast<unsigned long long>(connect_failures_),
                static_cast<unsigned long long>(per_worker())
            );
        }
        std::fflush(stdout);
    }

    asio::io_context& ioc_;
    settings s_;
    zkd::zkco::config cfg_;
    zkd::protocol::layout layout_;
    zkd::handlers::registry reg_;
    zkd::reactor::compute_pool pool_;  // run_worker wants one; the swarm's types never use it
    zkd::reactor::event drain_;
    zkd::reactor::event stop_;
    zkd::reactor::task_group group_;
    std::vector<std::unique_ptr<slot>> slots_;
    std::uint64_t lost_ = 0;
    std::uint64_t connect_failures_ = 0;
    std::uint64_t rss_start_ = 0;
    std::uint64_t rss_joined_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    spdlog::set_default_logger(spdlog::stderr_logger_mt("zkd-swarm"));
    spdlog::set_level(spdlog::level::warn);
    spdlog::cfg::load_env_levels();
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "--version") {
        std::printf("zkd-swarm %s\n", ZKD_VERSION);
        return 0;
    }
    zkd::swarm::parsed_args parsed;
    try {
        parsed = zkd::swarm::parse_args(args, [](const char* name) -> std::optional<std::string> {
            if (const char* v = std::getenv(name)) {  // NOLINT(concurrency-mt-unsafe)
                return std::string(v);
            }
            return std::nullopt;
        });
    } catch (const zkd::swarm::usage_error& e) {
        std::fprintf(stderr, "zkd-swarm: %s\n(see 'zkd-swarm --help')\n", e.what());
        return zkd::swarm::exit_usage;
    }
    if (parsed.help) {
        std::fputs(zkd::swarm::help_text(), stdout);
        return zkd::swarm::exit_ok;
    }
    asio::io_context ioc(1);
    swarm sw(ioc, parsed.s);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    std::function<void()> arm = [&] {
        signals.async_wait([&](const boost::system::error_code& ec, int) {
            if (ec) {
                return;
            }
            sw.signal();
            arm();
        });
    };
    arm();
    int rc = zkd::swarm::exit_errors;
    asio::co_spawn(ioc, sw.run(), [&](const std::exception_ptr& e, int code) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::fprintf(stderr, "zkd-swarm: unexpected: %s\n", ex.what());
            }
        } else {
            rc = code;
        }
        signals.cancel();
    });
    ioc.run();
    return rc;
}
