// SPDX-License-Identifier: MIT
// The acting master cut off from ZooKeeper past its session timeout, the way a network
// partition does it: no reset, just silence (a relay stops forwarding both ways). Another
// node takes over with a new epoch, every task still gets exactly one result, the cut-off
// master writes nothing as master (epoch fencing), and once the link heals it comes back as
// a new member. How long it believed itself master after the new one acted is reported
// (never asserted: it depends on the machine's timing).
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/node.hpp"
#include "support/relay.hpp"
#include "support/roles_cluster.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <iostream>
#include <optional>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::zkco::client;

namespace {

class RolesPartition : public zkd::test::roles_cluster {
protected:
    node_options node(const std::string& connect, const std::string& host) {
        node_options o;
        o.zk = connect;
        o.ns = "part"s;
        o.session_timeout = 2s;
        o.capacity = 2;
        o.host = host;
        return o;
    }

    /// Waits until `done()` holds, checking every 10 ms; false after `limit`.
    template <class Pred>
    asio::awaitable<bool> eventually(Pred& done, std::chrono::milliseconds limit = 20s) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < end) {
            if (done()) {
                co_return true;
            }
            co_await settle(10ms);
        }
        co_return false;
    }

    std::vector<task_spec> echoes(int from, int n) {
        std::vector<task_spec> v;
        for (int i = from; i < from + n; ++i) {
            v.push_back(task_spec{"echo"s, json::value(i)});
        }
        return v;
    }

    node_stats a_;  // the node cut off
    node_stats b_;  // the other
};

TEST_F(RolesPartition, AMasterCutOffPastItsSessionIsReplacedAndFencedAndLosesNothing) {
    run(
        [&]() -> asio::awaitable<void> {
            zkd::test::relay wire(ioc_, base_);
            // Members: the nodes outlive this coroutine (they stop at TearDown).
            auto& a = a_;
            auto& b = b_;
            node_links la;
            la.stats = &a;
            node_links lb;
            lb.stats = &b;
            roles_.spawn(
                run_node(node(wire.address() + chroot_, "cutoff"s), registry_, pool_, la), "a"s
            );
            auto a_leads = [&] { return a.master; };
            ASSERT_TRUE(co_await eventually(a_leads)) << "the first node never led";
            roles_.spawn(run_node(node(base_ + chroot_, "other"s), registry_, pool_, lb), "b"s);
            auto b_joined = [&] { return !b.member.empty(); };
            ASSERT_TRUE(co_await eventually(b_joined));

            auto cfg = make_config();
            cfg.connect_string += chroot_path("part"s);
            sessions_.push_back(std::make_unique<client>(ioc_.get_executor(), cfg));
            auto& zk = *sessions_.back();
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
            auto l = co_await ensure_layout(zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(zk, *l);
            auto before = co_await tc.submit(echoes(0, 20));
            ASSERT_TRUE(before);

            // The partition: nothing crosses the relay, in either direction, and nothing resets.
            const auto cut_at = std::chrono::steady_clock::now();
            wire.drop_requests(true);
            wire.drop_answers(true);
            auto during = co_await tc.submit(echoes(20, 20));
            ASSERT_TRUE(during);

            // When the new master acts and when the old one stops acting, each seen first.
            std::optional<std::chrono::steady_clock::time_point> b_acted;
            std::optional<std::chrono::steady_clock::time_point> a_stopped;
            auto both = [&] {
                const auto now = std::chrono::steady_clock::now();
                if (!b_acted && b.master && b.epoch == 2) {
                    b_acted = now;
                }
                if (!a_stopped && !a.master) {
                    a_stopped = now;
                }
                return b_acted && a_stopped;
            };
            ASSERT_TRUE(co_await eventually(both))
                << (b_acted ? "the cut-off master never stopped"
                            : "no new master while the old one is cut off");
            const auto ms = [&](std::chrono::steady_clock::time_point t) {
                return static_cast<int>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(t - cut_at).count()
                );
            };
            RecordProperty("new_master_acting_ms", ms(*b_acted));
            RecordProperty("old_master_stopped_ms", ms(*a_stopped));
            std::cout << "cut off at 0 ms; old master stopped acting at " << ms(*a_stopped)
                      << " ms; new master acting at " << ms(*b_acted) << " ms\n";

            // Every task, before and during the partition, has exactly its one result.
            std::vector<std::string> ids = *before;
            ids.insert(ids.end(), during->begin(), during->end());
            for (std::size_t i = 0; i < ids.size(); ++i) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(ids[i]), 20s);
                ASSERT_TRUE(r) << ids[i] << ": " << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << ids[i];
                EXPECT_EQ(r->value, json::value(static_cast<int>(i)));
            }
            co_await tc.flush();
            EXPECT_EQ(co_await queued(zk, true), 0U) << "results left behind (a task ran twice)";
            EXPECT_EQ(co_await queued(zk, false), 0U);
            // Fencing: while cut off, the old master's transactions could not apply; the epoch is
            // the new master's.
            auto epoch = co_await zk.get(layout::epoch());
            ASSERT_TRUE(epoch);
            EXPECT_EQ(epoch->stat.version, 2);

            // The link heals: the cut-off node comes back as a new member.
            wire.drop_requests(false);
            wire.drop_answers(false);
            auto a_rejoined = [&] { return a.sessions >= 2 && !a.member.empty(); };
            EXPECT_TRUE(co_await eventually(a_rejoined)) << "the cut-off node did not come back";
            EXPECT_TRUE(b.master);
        }(),
        90s
    );
}

}  // namespace

}  // namespace ZKD_UNITY_ID
