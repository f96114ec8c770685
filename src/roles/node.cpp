// SPDX-License-Identifier: MIT
#include "roles/node.hpp"

#include "protocol/ids.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/cluster/session_keeper.hpp"
#include "roles/schedule/engine.hpp"
#include "roles/workflow/engine.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <unistd.h>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

using namespace std::chrono_literals;

std::string hostname() {
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) {
        return "host";
    }
    return std::string(buf.data());
}

/// What a member joins as, for the log.
const char* joined_as(const node_options& o) {
    if (o.role == node_role::worker_only) {
        return "worker";
    }
    if (o.role == node_role::standby) {
        return "standby master";
    }
    return o.capacity > 0 ? "worker and candidate" : "candidate master with no slots (no tasks)";
}

/// Removes this member's candidate node, retrying while the outcome is unknown.
asio::awaitable<void> leave_election(zkco::client& zk, const std::string& path) {
    for (;;) {
        auto r = co_await zk.remove(path, zkco::any_version);
        if (r || r.error() == zkco::errc::no_node) {
            co_return;
        }
        const bool retry = co_await reconnected_after(zk, r.error());
        if (!retry) {
            co_return;
        }
    }
}

/// Runs for master, and acts as master when elected, until the session ends. A master that
/// is deposed while its session lives on (a newer master moved /epoch, or anyone wrote it)
/// leaves the election and runs again behind the other candidates: whoever leads next takes
/// over with a new epoch, itself included, so the cluster is never left without a master.
asio::awaitable<void> mastership(
    zkco::client& zk,
    const node_options& o,
    protocol::layout l,
    protocol::member_info me,
    node_stats& stats
) {
    if (o.role == node_role::worker_only) {
        co_return;
    }
    auto backoff = 100ms;
    for (;;) {
        auto won = co_await campaign(zk, me);
        if (!won) {
            co_return;  // the session ended
        }
        spdlog::info("node {}: elected master", me.id);
        const auto started = std::chrono::steady_clock::now();
        // /master holds the queue's bound and the say on direct placement from the start
        // (run_master writes them so thereafter).
        auto as_master = me;
        as_master.max_pending = protocol::published_bound(o.master.max_pending);
        as_master.direct = o.master.direct_placement;
        auto epoch = co_await take_over(zk, as_master, protocol::now_ms());
        if (epoch) {
            ++stats.elected;
            stats.epoch = *epoch;  // stats.master follows on_acting
            stats.max_pending = *as_master.max_pending;
            // The workflow and schedule engines act beside the master, fenced by the same
            // epoch, and stop with it (docs/protocol.md §11, §12).
            workflow_engine_options wo;
            wo.retention = o.master.result_retention;
            wo.direct = o.master.direct_placement;
            if (o.role != node_role::standby && o.capacity > 0) {
                wo.own_worker = me.id;  // the worker work() runs on this session
            }
            schedule_engine_options so;
            so.retention = o.master.result_retention;
            using namespace asio::experimental::awaitable_operators;
            co_await (
                run_master(zk, l, me, *epoch, o.master, &stats.master_totals) ||
                run_workflows(zk, l, *epoch, wo, &stats.workflows) ||
                run_schedules(zk, l, *epoch, so, &stats.schedules)
            );
            stats.master = false;
            stats.queue_depth = -1;
            stats.max_pending = -1;
            stats.master_totals.delayed = 0;
            stats.master_totals.delayed_next_due_ms = 0;
        } else {
            spdlog::warn("node {}: could not take over: {}", me.id, epoch.error().message());
        }
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none || zkco::is_terminal(zk.state())) {
            co_return;
        }
        // Deposed with the session alive: out of the election, then in again at its end. A
        // pause that grows while depositions come quickly (someone keeps writing /epoch).
        if (std::chrono::steady_clock::now() - started > 60s) {
            backoff = 100ms;
        }
        spdlog::info(
            "node {}: no longer master; leaving the election and running again in {} ms", me.id,
            backoff.count()
        );
        co_await leave_election(zk, won->path);
        const bool waited = co_await zkco::pause(backoff);
        if (!waited) {
            co_return;
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
}

/// Runs for master until the session ends or, once a drain was asked for, until the worker
/// has finished what it held (`worker_done`): then the node leaves, and with it mastership.
asio::awaitable<void> mastership_until_drained(
    zkco::client& zk,
    const node_options& o,
    protocol::layout l,
    protocol::member_info me,
    node_stats& stats,
    reactor::event* drain,
    reactor::event& worker_done
) {
    using namespace asio::experimental::awaitable_operators;
    if (drain == nullptr) {
        co_await mastership(zk, o, l, me, stats);
        co_return;
    }
    auto drained = [](reactor::event* d, reactor::event& w) -> asio::awaitable<void> {
        const bool asked = co_await d->wait();
        if (asked) {
            co_await w.wait();
        }
    };
    co_await (mastership(zk, o, l, me, stats) || drained(drain, worker_done));
}

asio::awaitable<void> work(
    zkco::client& zk,
    const node_options& o,
    protocol::layout l,
    protocol::member_info me,
    const handlers::registry& reg,
    reactor::compute_pool& pool,
    node_stats& stats,
    reactor::event& done
) {
    if (o.role != node_role::standby && o.capacity > 0) {
        me.capacity = o.capacity;
        co_await run_worker(zk, l, me, reg, pool, o.worker, &stats.worker);
    }
    done.set();
}

/// Keeps stats.session current until the session ends.
asio::awaitable<void> track_session(zkco::client& zk, node_stats& stats) {
    std::uint64_t seen = zk.state_generation();
    stats.session = zk.state();
    while (!zkco::is_terminal(stats.session)) {
        auto change = co_await zk.wait_state(seen);
        if (!change) {
            co_return;
        }
        seen = change->generation;
        stats.session = change->state;
    }
}

/// Feeds the node's counters from the roles' callbacks (keeping the caller's own).
void observe(node_options& o, node_stats& stats) {
    o.worker.on_published =
        [&stats, next = std::move(o.worker.on_published)](const protocol::task_result& r) {
            auto count = [&stats](protocol::task_state s) {
                switch (s) {
                case protocol::task_state::succeeded:
                    ++stats.succeeded;
                    break;
                case protocol::task_state::timed_out:
                    ++stats.timed_out;
                    break;
                case protocol::task_state::cancelled:
                    ++stats.cancelled;
                    break;
                default:
                    ++stats.failed;
                    break;
                }
            };
            if (r.bundle.empty()) {
                count(r.state);
            }
            for (const auto& entry : r.bundle) {
                count(entry.state);  // a bundle's tasks count one by one
            }
            if (next) {
                next(r);
            }
        };
    o.master.on_assigned = [&stats,
                            next = std::move(o.master.on_assigned)](const protocol::task_head& t) {
        if (t.submitted_ms > 0) {
            stats.assign_latency.observe(
                static_cast<double>(std::max<std::int64_t>(0, protocol::now_ms() - t.submitted_ms))
            );
        }
        if (next) {
            next(t);
        }
    };
    o.master.on_acting = [&stats, next = std::move(o.master.on_acting)](bool acting) {
        stats.master = acting;
        if (next) {
            next(acting);
        }
    };
    o.master.on_queue_depth = [&stats, next = std::move(o.master.on_queue_depth)](std::size_t n) {
        stats.queue_depth = static_cast<std::int64_t>(n);
        if (next) {
            next(n);
        }
    };
}

}  // namespace

asio::awaitable<void> run_node(
    node_options o, const handlers::registry& reg, reactor::compute_pool& pool, node_links links
) {
    using namespace asio::experimental::awaitable_operators;
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto ex = co_await asio::this_coro::executor;
    node_stats own_stats;
    node_stats& stats = links.stats != nullptr ? *links.stats : own_stats;
    observe(o, stats);
    o.worker.drain = links.drain;
    const auto drained = [&links] { return links.drain != nullptr && links.drain->is_set(); };
    const std::string chroot = protocol::chroot_path(o.ns);
    const std::string host = o.host.empty() ? hostname() : o.host;
    connect_policy policy;
    policy.who = "node";
    policy.attempt_timeout = std::max(o.session_timeout, std::chrono::milliseconds(2000));
    policy.stop = links.drain;
    zkco::config cfg;
    cfg.connect_string = o.zk + chroot;
    cfg.session_timeout = o.session_timeout;
    cfg.auth = o.auth;

    // The namespace must exist before a chrooted session can use it: create it from the
    // ensemble's root.
    const auto place = place_namespace(o.zk, chroot);
    // Not in ?: : GCC 12 miscompiles a co_await inside && or ?:.
    zkco::result<void> made(zkco::errc::bad_arguments);
    if (place) {
        made = co_await make_namespace(cfg, *place, policy);
    }
    if (!made) {
        if (made.error() != asio::error::operation_aborted) {
            spdlog::error(
                "node: cannot create the namespace {}: {}", chroot, made.error().message()
            );
        }
        co_return;
    }

    // Session after session, a new member each time.
    auto member = [&](const std::shared_ptr<zkco::client>& client) -> asio::awaitable<bool> {
        auto& zk = *client;
        if (drained()) {
            co_return false;
        }
        auto l = co_await ensure_layout(zk, protocol::meta_info{16, 16, protocol::now_ms()});
        const bool stop_asked = co_await zkco::cancelled();  // meanwhile: do not join
        if (stop_asked) {
            co_return false;
        }
        if (!l &&
            (l.error() == zkco::errc::invalid_acl || l.error() == zkco::errc::data_inconsistency)) {
            // A namespace others can write to (check_protected said which node and why), or
            // a /meta this zkd cannot use (garbage, another protocol format; logged):
            // waiting would not change it. Stop; `zkd run` exits 1.
            co_return false;
        }
        if (!l) {
            spdlog::error(
                "node: cannot set up the cluster layout: {}; trying again in 2 s",
                l.error().message()
            );
            const bool waited = co_await zkco::pause(2000ms);  // named: GCC 12 and co_await in if
            co_return waited;
        }
        protocol::member_info me;
        me.id = protocol::new_member_id(host, static_cast<long>(::getpid()));
        stats.member = me.id;
        ++stats.sessions;
        me.host = host;
        me.pid = ::getpid();
        spdlog::info(
            "node {}: joined {} as {} (session 0x{:x})", me.id, chroot, joined_as(o),
            zk.session() ? zk.session()->id : 0
        );
        reactor::event worker_done(ex);
        co_await (
            (work(zk, o, *l, me, reg, pool, stats, worker_done) &&
             mastership_until_drained(zk, o, *l, me, stats, links.drain, worker_done)) ||
            track_session(zk, stats)
        );
        stats.session = zk.state();
        stats.member.clear();
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none || drained()) {
            spdlog::info("node {}: left the cluster", me.id);
            co_return false;
        }
        spdlog::warn(
            "node {}: session {}; rejoining as a new member", me.id, zkco::to_string(zk.state())
        );
        co_return true;
    };
    co_await keep_sessions(cfg, policy, member);
    stats.session = zkco::session_state::closed;
}

}  // namespace zkd::roles
