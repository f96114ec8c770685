// SPDX-License-Identifier: MIT
// A zkd cluster in one process for integration tests: a master and workers on sessions of
// their own (run_master / run_worker), against the fixture's real ZooKeeper.
#pragma once

#include "handlers/builtin.hpp"
#include "protocol/ids.hpp"
#include "protocol/queue_bound.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/inspect.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/master/master.hpp"
#include "roles/worker/worker.hpp"
#include "support/workers_joined.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace zkd::test {

/// A worker started by roles_cluster: its session (close it to make the worker depart) and
/// its member info.
struct started_worker {
    zkco::client* zk = nullptr;
    protocol::member_info me;
};

/// The fixture: builtin handlers in `registry_`, a 2-thread pool, the roles in `roles_`
/// (stopped, with every session closed, at TearDown).
class roles_cluster : public zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        handlers::add_builtin_handlers(registry_);
    }

    void TearDown() override {
        if (ready_) {
            before_teardown();
            roles_.emit(boost::asio::cancellation_type::terminal);
            run([&]() -> boost::asio::awaitable<void> {
                for (auto& s : sessions_) {
                    co_await s->close();
                }
                co_await roles_.async_wait(boost::asio::use_awaitable);
            }());
            sessions_.clear();
        }
        zk_test::TearDown();
    }

    /// Runs at TearDown before the roles stop (for what the test started besides them).
    virtual void before_teardown() {}

    static protocol::member_info member(const std::string& host, int capacity) {
        protocol::member_info m;
        m.id = protocol::new_member_id(host, 7);
        m.host = host;
        m.pid = 7;
        m.capacity = capacity;
        return m;
    }

    /// A connected session of its own, kept until TearDown (or closed by the test).
    boost::asio::awaitable<zkco::client*> session() {
        sessions_.push_back(std::make_unique<zkco::client>(ioc_.get_executor(), make_config()));
        auto c = co_await zkco::with_timeout(sessions_.back()->connect(), std::chrono::seconds(30));
        if (!c) {
            throw std::runtime_error("connect: " + c.error().message());
        }
        co_return sessions_.back().get();
    }

    /// A session with the cluster's layout made (and kept in layout_).
    boost::asio::awaitable<zkco::client*> cluster_session() {
        auto* zk = co_await session();
        auto l = co_await roles::ensure_layout(*zk, protocol::meta_info{});
        if (!l) {
            throw std::runtime_error("layout: " + l.error().message());
        }
        layout_ = *l;
        co_return zk;
    }

    /// Elects a master on a session of its own and runs it; its member info.
    boost::asio::awaitable<protocol::member_info> start_master(roles::master_options opts = {}) {
        auto* zk = co_await session();
        master_zk_ = zk;
        auto me = member("master", 0);
        me.max_pending = protocol::published_bound(opts.max_pending);  // as zkd run's node does
        me.direct = opts.direct_placement;
        auto won = co_await roles::campaign(*zk, me);
        if (!won) {
            throw std::runtime_error("campaign: " + won.error().message());
        }
        auto epoch = co_await roles::take_over(*zk, me, protocol::now_ms());
        if (!epoch) {
            throw std::runtime_error("take_over: " + epoch.error().message());
        }
        roles_.spawn(
            roles::run_master(*zk, layout_, me, *epoch, std::move(opts), &master_stats_), "master"
        );
        co_return me;
    }

    /// Runs a worker `name` (its stats in worker_stats_[name]) on a session of its own.
    boost::asio::awaitable<started_worker> start_worker(
        const std::string& name,
        int capacity,
        std::vector<std::string> types = {},
        roles::worker_options opts = {}
    ) {
        auto* zk = co_await session();
        auto me = member(name, capacity);
        me.types = std::move(types);
        roles_.spawn(
            roles::run_worker(
                *zk, layout_, me, registry_, pool_, std::move(opts), &worker_stats_[name]
            ),
            name
        );
        co_return started_worker{zk, me};
    }

    /// Children of every pending shard (or of every directory below /results: the result
    /// shards and the clients' directories).
    boost::asio::awaitable<std::size_t> queued(zkco::client& zk, bool results) {
        std::size_t n = 0;
        std::vector<std::string> dirs = layout_.pending_shard_paths();
        if (results) {
            dirs = (co_await roles::list_result_dirs(zk)).value();
        }
        for (const auto& shard : dirs) {
            auto kids = co_await zk.get_children(shard);
            n += kids ? kids->names.size() : 0;
        }
        co_return n;
    }

    boost::asio::awaitable<void> settle(std::chrono::milliseconds d) {
        boost::asio::steady_timer t(ioc_, d);
        co_await t.async_wait(boost::asio::use_awaitable);
    }

    /// Waits (up to 30 s) until the master has listed every pending shard once. A test
    /// counting the master's listings counts only its own then, also on a loaded machine
    /// where a task may be placed directly and finish before the start-up listing does.
    boost::asio::awaitable<void> master_listed() {
        using namespace std::chrono_literals;
        const auto until = std::chrono::steady_clock::now() + 30s;
        while (master_stats_.shard_listings < layout_.pending_shards) {
            if (std::chrono::steady_clock::now() > until) {
                throw std::runtime_error("the master did not list its pending shards in 30 s");
            }
            co_await settle(20ms);
        }
    }

    /// Waits (up to 30 s) until the master has listed every pending shard and then read
    /// nothing for 300 ms: its start-up reads (shards, delayed shards, workers) are over, so
    /// a test counting the master's reads counts only its own. Not for a master that sweeps
    /// often (its sweeps read).
    boost::asio::awaitable<void> master_settled() {
        using namespace std::chrono_literals;
        co_await master_listed();
        const auto until = std::chrono::steady_clock::now() + 30s;
        auto reads = master_zk_->counters().reads;
        for (;;) {
            co_await settle(300ms);
            const auto now = master_zk_->counters().reads;
            if (now == reads) {
                co_return;
            }
            if (std::chrono::steady_clock::now() > until) {
                throw std::runtime_error("the master kept reading for 30 s");
            }
            reads = now;
        }
    }

    /// Waits (up to 30 s) until `n` workers have joined as a client sees them (support/
    /// workers_joined.hpp). start_worker() returns before that; a test whose counts depend on
    /// which tasks went to workers directly waits for this before its first submit.
    boost::asio::awaitable<void> workers_joined(zkco::client& zk, std::size_t n) {
        // A statement of its own: GCC 12 miscompiles a co_await inside a condition.
        const bool joined = co_await test::workers_joined(zk, n);
        if (!joined) {
            throw std::runtime_error("workers did not join within 30 s");
        }
    }

    handlers::registry registry_;
    reactor::compute_pool pool_{2};
    reactor::task_group roles_{ioc_.get_executor()};
    std::vector<std::unique_ptr<zkco::client>> sessions_;
    protocol::layout layout_;
    roles::master_stats master_stats_;
    zkco::client* master_zk_ = nullptr;  ///< the session of the master start_master() ran
    std::map<std::string, roles::worker_stats> worker_stats_;
};

}  // namespace zkd::test
