// SPDX-License-Identifier: MIT
// Bundles (docs/protocol.md §4.1): several tasks in one node, against a real ZooKeeper with
// the roles in one process. Each bundled task gets exactly its own result, whichever clients
// wait for them and in whatever order; a bundle is requeued as a whole, while one task of it
// is cancelled alone and only its failed tasks are retried; a bundle whose node lies about
// its size ends in error results, and the cluster carries on.
#include "protocol/client_txn.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/txn/zk_ops.hpp"
#include "support/roles_cluster.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::zkco::client;

namespace {

class RolesBundle : public zkd::test::roles_cluster {
protected:
    /// Waits for every id at once (the waits of one client on one bundle share its read);
    /// `peek`: with await_result, consuming nothing (those share a read too).
    asio::awaitable<std::vector<zkd::zkco::result<task_result>>> wait_all(
        task_client& tc, std::vector<std::string> ids, bool peek = false
    ) {
        std::vector<zkd::zkco::result<task_result>> out(
            ids.size(), zkd::zkco::error_code(zkd::zkco::errc::operation_timeout)
        );
        zkd::reactor::task_group waits(ioc_.get_executor());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            waits.spawn([&tc, &out, &ids, i, peek]() -> asio::awaitable<void> {
                // (A conditional inside the co_await is destroyed twice by GCC 12.)
                auto call = peek ? tc.await_result(ids[i]) : tc.wait(ids[i]);
                out[i] = co_await zkd::zkco::with_timeout(std::move(call), 60s);
            });
        }
        co_await waits.async_wait(asio::use_awaitable);
        co_return out;
    }

    /// Consumes every id at once and expects it done with one read and one write of `zk`,
    /// the session of `tc` (and of nothing else).
    asio::awaitable<void> consume_at_once(
        task_client& tc, zkd::zkco::client& zk, std::vector<std::string> ids
    ) {
        const auto before = zk.counters();
        std::vector<zkd::zkco::result<void>> done(ids.size());
        zkd::reactor::task_group consumes(ioc_.get_executor());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            consumes.spawn([&tc, &done, &ids, i]() -> asio::awaitable<void> {
                done[i] = co_await zkd::zkco::with_timeout(tc.consume(ids[i]), 30s);
            });
        }
        co_await consumes.async_wait(asio::use_awaitable);
        for (std::size_t i = 0; i < done.size(); ++i) {
            EXPECT_TRUE(done[i]) << ids[i] << ": " << done[i].error().message();
        }
        const auto after = zk.counters();
        EXPECT_EQ(after.reads - before.reads, 1U);
        EXPECT_EQ(after.writes - before.writes, 1U);
    }

    /// Waits (up to 30 s) until /master names entry_results (`want`), or no longer does: the
    /// master names it once it has read every worker (docs/protocol.md §2 "Features"), and
    /// clients make automatic bundles only while it does.
    asio::awaitable<void> master_says_entry_results(zkd::zkco::client& zk, bool want = true) {
        for (int i = 0; i < 1500; ++i) {
            auto m = co_await zk.get(std::string(layout::master()));
            const auto node = m ? decode_master(m->data) : decode_master("");
            const bool says =
                node && std::ranges::binary_search(node->features, feature_entry_results);
            if (says == want) {
                co_return;
            }
            co_await settle(20ms);
        }
        ADD_FAILURE() << "/master never said " << (want ? "" : "no ") << "entry_results";
    }

    static std::vector<task_spec> sums(int n, int first = 0) {
        std::vector<task_spec> reqs;
        for (int i = first; i < first + n; ++i) {
            reqs.push_back({"sum", json::array{i, 1}});
        }
        return reqs;
    }
};

TEST_F(RolesBundle, EachBundledTaskGetsExactlyItsResult) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 2);
            co_await start_worker("w2", 2);
            co_await workers_joined(*zk, 2);  // for the count of tasks placed directly
            task_client tc(*zk, layout_);

            // sum x5, echo, sum x2, with bad args in two of them: bundles of at most 4 tasks of
            // one type each.
            auto reqs = sums(5);
            reqs[3].args = "not numbers";
            reqs.push_back({"echo", "alone"});
            auto more = sums(2, 10);
            more[1].args = json::object{{"x", 1}};
            reqs.insert(reqs.end(), more.begin(), more.end());
            submit_options how;
            how.bundle = 4;
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids) << ids.error().message();
            ASSERT_EQ(ids->size(), 8U);
            const auto first = parse_task_ref((*ids)[0]);
            ASSERT_TRUE(first && first->index);
            EXPECT_EQ(bundle_size(first->node), 4U);
            for (std::size_t i = 0; i < 4; ++i) {
                EXPECT_EQ((*ids)[i], bundled_task_id(first->node, i));
            }
            EXPECT_EQ(bundle_size((*ids)[4]), 0U);  // the fifth sum: alone in its node
            EXPECT_TRUE(is_valid_task_id((*ids)[4]));
            EXPECT_TRUE(is_valid_task_id((*ids)[5]));  // echo: another type
            const auto last = parse_task_ref((*ids)[6]);
            ASSERT_TRUE(last && last->index);
            EXPECT_EQ(bundle_size(last->node), 2U);

            // One at a time: each wait consumes only its own task's result.
            for (std::size_t i = 0; i < ids->size(); ++i) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait((*ids)[i]), 60s);
                ASSERT_TRUE(r) << i << ": " << r.error().message();
                EXPECT_EQ(r->task, (*ids)[i]);
                if (i == 3 || i == 7) {
                    EXPECT_EQ(r->state, task_state::failed) << i;
                    ASSERT_TRUE(r->error);
                    EXPECT_EQ(r->error->code, "bad_args");
                } else if (i == 5) {
                    EXPECT_EQ(r->value, json::value("alone"));
                } else {
                    const int n = i < 5 ? static_cast<int>(i) : 10 + static_cast<int>(i) - 6;
                    EXPECT_EQ(r->state, task_state::succeeded) << i;
                    EXPECT_EQ(r->value.at("sum").to_number<std::int64_t>(), n + 1) << i;
                    EXPECT_EQ(r->attempt, 1);
                    EXPECT_FALSE(r->worker.empty());
                }
                // The bundle's result stays until its last task's is consumed.
                if (i == 0) {
                    auto st = co_await tc.status((*ids)[1]);
                    ASSERT_TRUE(st);
                    EXPECT_EQ(st->state, task_state::succeeded);
                    EXPECT_EQ((co_await tc.status((*ids)[0]))->state, task_state::unknown);
                }
            }
            co_await tc.flush();
            EXPECT_EQ(co_await queued(*zk, true), 0U);
            EXPECT_EQ(co_await queued(*zk, false), 0U);
            // Two bundles and two tasks: four assignments, eight results counted by the workers.
            // The plain tasks went to the workers directly (§6 T1 "Direct placement"), the
            // bundles never do.
            EXPECT_EQ(tc.direct_placed(), 2U);
            EXPECT_EQ(master_stats_.assigned, 2U);
        }(),
        120s
    );
}

TEST_F(RolesBundle, WaitsShareOneReadAndClientsShareABundle) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 4);
            auto* other_zk = co_await session();
            task_client a(*zk, layout_);
            task_client b(*other_zk, layout_);
            submit_options how;
            how.bundle = 100;
            auto ids = co_await a.submit(sums(40), how);
            ASSERT_TRUE(ids) << ids.error().message();
            ASSERT_EQ(ids->size(), 40U);
            const std::string bundle(parse_task_ref(ids->front())->node);
            EXPECT_EQ(bundle_size(bundle), 40U);

            // Client a waits for the first 30 at once: one read of the bundle's result, one
            // write. Its own bundle's result (or a task's own one, §6 T4e) comes through the
            // follower of its results directory: the directory's data, its first listing,
            // its data again once the result is there.
            const auto before = zk->counters();
            std::vector<std::string> mine(ids->begin(), ids->begin() + 30);
            auto got = co_await wait_all(a, mine);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->task, mine[i]);
                EXPECT_EQ(
                    got[i]->value.at("sum").to_number<std::int64_t>(), static_cast<int>(i) + 1
                );
            }
            const auto after = zk->counters();
            EXPECT_LE(after.reads - before.reads, 4U);
            EXPECT_LE(after.writes - before.writes, 2U);

            // Another client: a task consumed already is no longer there for it...
            auto again = co_await zkd::zkco::with_timeout(b.wait(ids->front()), 30s);
            ASSERT_FALSE(again);
            EXPECT_EQ(again.error(), zkd::zkco::errc::no_node);
            // ...the rest is, and the last one consumed takes the node away.
            std::vector<std::string> rest(ids->begin() + 30, ids->end());
            auto theirs = co_await wait_all(b, rest);
            for (std::size_t i = 0; i < theirs.size(); ++i) {
                ASSERT_TRUE(theirs[i]) << i << ": " << theirs[i].error().message();
                EXPECT_EQ(
                    theirs[i]->value.at("sum").to_number<std::int64_t>(), static_cast<int>(i) + 31
                );
            }
            EXPECT_EQ(co_await queued(*zk, true), 0U);
            EXPECT_EQ(master_stats_.assigned, 1U);
            EXPECT_EQ(worker_stats_["w1"].published, 1U);
        }(),
        120s
    );
}

// The consumes of a bundle's tasks at a time (POST /v1/tasks?wait delivers each task's result,
// then consumes it) share one read of the bundle's result and one write: each a write of its
// own would conflict with the others' on the node's version, and read and write again.
TEST_F(RolesBundle, ConsumesOfABundlesTasksAtATimeShareOneReadAndOneWrite) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 4);
            task_client tc(*zk, layout_);
            // Another client's session consumes: nothing else of it reads or writes.
            auto* other_zk = co_await session();
            task_client other(*other_zk, layout_);
            submit_options how;
            how.bundle = 40;
            // echo runs on the worker's loop: all 40 end in one turn, none published early
            // in a node of its own (§6 T4e), whose consume would be a delete of its own.
            std::vector<task_spec> echoes(40, task_spec{"echo", json::object{{"n", 1}}});
            auto ids = co_await tc.submit(echoes, how);
            ASSERT_TRUE(ids) << ids.error().message();
            const std::string bundle(parse_task_ref(ids->front())->node);
            auto got = co_await wait_all(other, *ids, true);  // read, not consumed
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
            }
            const auto path = layout_.result(bundle);
            auto first = co_await zk->get(path);
            ASSERT_TRUE(first) << first.error().message();
            const auto as_read = decode_result(first->data);
            ASSERT_TRUE(as_read);
            ASSERT_TRUE(as_read->published.empty());

            // 30 of the 40: one set of the bundle's result, which names the 30 consumed.
            co_await consume_at_once(other, *other_zk, {ids->begin(), ids->begin() + 30});
            auto now = co_await zk->get(path);
            ASSERT_TRUE(now) << now.error().message();
            EXPECT_EQ(now->stat.version, first->stat.version + 1);
            const auto whole = decode_result(now->data);
            ASSERT_TRUE(whole);
            EXPECT_EQ(whole->consumed.size(), 30U);
            // The other 10: one delete of it.
            co_await consume_at_once(other, *other_zk, {ids->begin() + 30, ids->end()});
            auto gone = co_await zk->exists(path);
            ASSERT_TRUE(gone);
            EXPECT_FALSE(*gone);
            co_await other.flush();
        }(),
        120s
    );
}

// A bundle's result node that holds garbage (§8) is nobody's result: the consumes of its
// tasks delete it, and report nothing to consume.
TEST_F(RolesBundle, ConsumesOfABundleWhoseResultIsGarbageDeleteIt) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 3;
            auto ids = co_await tc.submit(sums(3), how);  // no worker: it stays pending
            ASSERT_TRUE(ids) << ids.error().message();
            const std::string bundle(parse_task_ref(ids->front())->node);
            const auto path = layout_.result(bundle);
            ASSERT_TRUE(co_await zk->create(path, "{\"not\": \"a result\""s));
            zkd::zkco::result<void> first = zkd::zkco::error_code(asio::error::timed_out);
            zkd::zkco::result<void> second = zkd::zkco::error_code(asio::error::timed_out);
            zkd::reactor::task_group consumes(ioc_.get_executor());
            consumes.spawn([&]() -> asio::awaitable<void> {
                first = co_await zkd::zkco::with_timeout(tc.consume((*ids)[0]), 30s);
            });
            consumes.spawn([&]() -> asio::awaitable<void> {
                second = co_await zkd::zkco::with_timeout(tc.consume((*ids)[1]), 30s);
            });
            co_await consumes.async_wait(asio::use_awaitable);
            EXPECT_TRUE(first) << first.error().message();
            EXPECT_TRUE(second) << second.error().message();
            co_await tc.flush();  // the garbage's delete goes in the background
            auto gone = co_await zk->exists(path);
            ASSERT_TRUE(gone);
            EXPECT_FALSE(*gone) << "the garbage is still there";
        }(),
        60s
    );
}

// A client that consumes a bundle of its own while it follows its results directory for a
// plain task counts that delete as its own change: the next change log it reads accounts
// for every change, and it does not list the directory again.
TEST_F(RolesBundle, ConsumingItsOwnBundleIsTheClientsOwnChange) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 4);
            task_client tc(*zk, layout_);
            // A plain task that takes a while, waited for: the follower runs meanwhile.
            std::vector<task_spec> sleep_task{{"sleep", json::object{{"ms", 3000}}}};
            auto slow = co_await tc.submit(sleep_task);
            ASSERT_TRUE(slow) << slow.error().message();
            zkd::reactor::task_group waits(ioc_.get_executor());
            zkd::zkco::result<task_result> slow_result =
                zkd::zkco::error_code(zkd::zkco::errc::operation_timeout);
            waits.spawn([&]() -> asio::awaitable<void> {
                slow_result = co_await zkd::zkco::with_timeout(tc.wait(slow->front()), 60s);
            });
            submit_options how;
            how.bundle = 2;
            auto ids = co_await tc.submit(sums(2), how);
            ASSERT_TRUE(ids) << ids.error().message();
            auto got = co_await wait_all(tc, *ids);  // the last one deletes the bundle's node
            for (const auto& r : got) {
                ASSERT_TRUE(r) << r.error().message();
            }
            // The sleep task is still waited for: the follower ran while the bundle went.
            ASSERT_FALSE(slow_result) << "the sleep task ended before the bundle was consumed";
            const auto listings = tc.results_listings();
            EXPECT_GE(listings, 1U);  // the follower's first
            co_await waits.async_wait(asio::use_awaitable);
            ASSERT_TRUE(slow_result) << slow_result.error().message();
            EXPECT_EQ(slow_result->state, task_state::succeeded);
            EXPECT_EQ(tc.results_listings(), listings)
                << "the bundle's delete was taken for someone else's change";
            co_await tc.flush();
        }(),
        120s
    );
}

TEST_F(RolesBundle, AWaitThatTimesOutLeavesNothingBehind) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 3;
            std::vector<task_spec> reqs(3, task_spec{"echo", "x"});
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids);
            // No worker yet: the first wait reads for two, and both give up.
            std::vector<std::string> two{(*ids)[0], (*ids)[1]};
            std::vector<zkd::zkco::result<task_result>> early(2, zkd::zkco::error_code{});
            zkd::reactor::task_group waits(ioc_.get_executor());
            for (std::size_t i = 0; i < 2; ++i) {
                waits.spawn([&, i]() -> asio::awaitable<void> {
                    early[i] = co_await zkd::zkco::with_timeout(tc.wait(two[i]), 300ms);
                });
            }
            co_await waits.async_wait(asio::use_awaitable);
            for (const auto& r : early) {
                ASSERT_FALSE(r);
                EXPECT_EQ(r.error(), zkd::zkco::errc::operation_timeout) << r.error().message();
            }
            // Later waits are not stuck behind the abandoned ones, and nothing was consumed.
            co_await start_worker("w1", 1);
            auto got = co_await wait_all(tc, *ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->value, json::value("x"));
            }
            EXPECT_EQ(co_await queued(*zk, true), 0U);
        }(),
        120s
    );
}

// Early results (docs/protocol.md §6 T4e): a worker may publish a finished task of a bundle
// in a result node of its own, `<bundle>.<k>`, while the others run, and then lists it in
// the bundle's result's `published`. The nodes are written here by hand, as such a worker
// writes them (with the results directory's change log), on a bundle no worker runs.
TEST_F(RolesBundle, ATaskPublishedEarlyIsTakenFromItsOwnNodeAndConsumedWithIt) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 2;
            auto ids = co_await tc.submit(sums(2), how);
            ASSERT_TRUE(ids) << ids.error().message();
            const auto ref = parse_task_ref((*ids)[0]);
            ASSERT_TRUE(ref && ref->index);
            const std::string bundle(ref->node);
            // The client says it reads early results, in the bundle's node.
            auto pending = co_await zk->get(layout_.pending_task(bundle));
            ASSERT_TRUE(pending) << pending.error().message();
            auto node = decode_task_node(pending->data);
            ASSERT_TRUE(node);
            EXPECT_TRUE(node->task.entry_results);

            const auto write = [&](std::string path, task_result r) -> asio::awaitable<void> {
                zkd::zkco::op::create c;  // (GCC 12 rejects the braced form in a coroutine)
                c.path = std::move(path);
                c.data = encode(r);
                std::vector<zkd::zkco::multi_op> ops;
                ops.emplace_back(std::move(c));
                append_change_logs(ops);
                auto done = co_await zk->multi(std::move(ops));
                EXPECT_TRUE(done) << done.ec.message();
            };
            task_result first;
            first.task = (*ids)[0];
            first.value = json::object{{"sum", 41}};
            first.attempt = 1;
            first.worker = "by-hand";
            first.started_ms = now_ms();
            first.finished_ms = first.started_ms;
            // A wait begun before the task is published gets it from its own node.
            zkd::zkco::result<task_result> early =
                zkd::zkco::error_code(zkd::zkco::errc::operation_timeout);
            zkd::reactor::task_group waits(ioc_.get_executor());
            waits.spawn([&]() -> asio::awaitable<void> {
                early = co_await zkd::zkco::with_timeout(tc.await_result((*ids)[0]), 30s);
            });
            co_await write(entry_result_path(layout_, bundle, 0), first);
            co_await waits.async_wait(asio::use_awaitable);
            ASSERT_TRUE(early) << early.error().message();
            EXPECT_EQ(early->task, (*ids)[0]);
            EXPECT_EQ(early->value.at("sum"), json::value(41));

            // Status (zkd status, GET /v1/tasks/ID): the task is done, its neighbour not.
            auto st0 = co_await read_task(*zk, layout_, (*ids)[0]);
            ASSERT_TRUE(st0) << st0.error().message();
            EXPECT_EQ(st0->state, task_state::succeeded);
            EXPECT_EQ(st0->worker, "by-hand");
            ASSERT_TRUE(st0->result);
            EXPECT_EQ(st0->result->value.at("sum"), json::value(41));
            auto st1 = co_await read_task(*zk, layout_, (*ids)[1]);
            ASSERT_TRUE(st1);
            EXPECT_EQ(st1->state, task_state::pending);
            auto peeked = co_await peek_result(*zk, layout_, (*ids)[0]);
            ASSERT_TRUE(peeked && *peeked);
            EXPECT_EQ((*peeked)->task, (*ids)[0]);

            // Its wait consumes the own node (a plain delete).
            auto got = co_await zkd::zkco::with_timeout(tc.wait((*ids)[0]), 30s);
            ASSERT_TRUE(got) << got.error().message();
            EXPECT_EQ(got->value.at("sum"), json::value(41));
            co_await tc.flush();
            auto own = co_await zk->exists(entry_result_path(layout_, bundle, 0));
            ASSERT_TRUE(own);
            EXPECT_FALSE(*own);
            // Its bundle's node lists it in `published` (as a running bundle's assignment
            // does, and a requeued bundle's node, §4.3): consumed, so unknown.
            auto now = co_await zk->get(layout_.pending_task(bundle));
            ASSERT_TRUE(now);
            auto marked = json::parse(now->data).as_object();
            marked["finished"] = json::array{
                json::object{{"state", "succeeded"}, {"value", json::object{{"sum", 41}}}},
                nullptr};
            marked["published"] = json::array{0};
            ASSERT_TRUE(co_await zk->set(layout_.pending_task(bundle), json::serialize(marked)));
            auto consumed = co_await read_task(*zk, layout_, (*ids)[0]);
            ASSERT_TRUE(consumed) << consumed.error().message();
            EXPECT_EQ(consumed->state, task_state::unknown);
            EXPECT_EQ((co_await read_task(*zk, layout_, (*ids)[1]))->state, task_state::pending);

            // The bundle ends: its result lists task 0 in `published` (with its entry as it
            // was published), task 1 is the bundle's.
            auto removed = co_await zk->remove(layout_.pending_task(bundle));
            EXPECT_TRUE(removed) << removed.error().message();
            task_result whole;
            whole.task = bundle;
            whole.attempt = 1;
            whole.worker = "by-hand";
            task_result e0;
            e0.value = json::object{{"sum", 41}};
            task_result e1;
            e1.value = json::object{{"sum", 2}};
            whole.bundle = {e0, e1};
            summarize_bundle(whole);
            whole.published = {0};
            co_await write(layout_.result(bundle), whole);
            // Task 0's own node is its only truth: gone, so its result was consumed.
            st0 = co_await read_task(*zk, layout_, (*ids)[0]);
            ASSERT_TRUE(st0);
            EXPECT_EQ(st0->state, task_state::unknown);
            EXPECT_FALSE(st0->result);
            peeked = co_await peek_result(*zk, layout_, (*ids)[0]);
            ASSERT_TRUE(peeked);
            EXPECT_FALSE(*peeked);
            st1 = co_await read_task(*zk, layout_, (*ids)[1]);
            ASSERT_TRUE(st1);
            EXPECT_EQ(st1->state, task_state::succeeded);
            // A wait on task 0 now finds it consumed; task 1's consume is the last one not
            // published: it deletes the bundle's result.
            auto again = co_await zkd::zkco::with_timeout(tc.await_result((*ids)[0]), 30s);
            ASSERT_FALSE(again);
            EXPECT_EQ(again.error(), zkd::zkco::errc::no_node) << again.error().message();
            got = co_await zkd::zkco::with_timeout(tc.wait((*ids)[1]), 30s);
            ASSERT_TRUE(got) << got.error().message();
            EXPECT_EQ(got->task, (*ids)[1]);
            EXPECT_EQ(got->value.at("sum"), json::value(2));
            co_await tc.flush();
            auto left = co_await zk->get_children(layout_.result_dir(bundle));
            ASSERT_TRUE(left) << left.error().message();
            EXPECT_TRUE(left->names.empty());
        }(),
        120s
    );
}

// With a worker that publishes early: the fast task of a bundle is the waiting client's while
// its slow neighbour still runs, and consuming both leaves the client's results empty.
TEST_F(RolesBundle, AFastTaskOfABundleIsDeliveredWhileItsSlowNeighbourRuns) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 2);
            task_client tc(*zk, layout_);
            std::vector<task_spec> reqs{
                {"sleep", json::object{{"ms", 1}}}, {"sleep", json::object{{"ms", 5000}}}};
            submit_options how;
            how.bundle = 2;
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids) << ids.error().message();
            ASSERT_EQ(ids->size(), 2U);
            auto fast = co_await zkd::zkco::with_timeout(tc.wait((*ids)[0]), 60s);
            ASSERT_TRUE(fast) << fast.error().message();
            EXPECT_EQ(fast->task, (*ids)[0]);
            EXPECT_EQ(fast->state, task_state::succeeded);
            auto slow = co_await read_task(*zk, layout_, (*ids)[1]);
            ASSERT_TRUE(slow) << slow.error().message();
            EXPECT_TRUE(slow->state == task_state::running || slow->state == task_state::assigned)
                << "the slow task is " << to_string(slow->state)
                << " when the fast one's result came";
            co_await tc.flush();  // (the wait's delete rides with the next write: send it)
            auto st = co_await read_task(*zk, layout_, (*ids)[0]);
            ASSERT_TRUE(st);
            EXPECT_EQ(st->state, task_state::unknown);  // consumed, while its bundle runs
            auto rest = co_await zkd::zkco::with_timeout(tc.wait((*ids)[1]), 60s);
            ASSERT_TRUE(rest) << rest.error().message();
            EXPECT_EQ(rest->task, (*ids)[1]);
            EXPECT_EQ(rest->state, task_state::succeeded);
            co_await tc.flush();
            auto left =
                co_await zk->get_children(layout_.result_dir(parse_task_ref((*ids)[0])->node));
            ASSERT_TRUE(left) << left.error().message();
            EXPECT_TRUE(left->names.empty());
        }(),
        120s
    );
}

// Another client's wait (zkd wait ID) watches both places a bundled task's result may come;
// consume (DELETE /v1/tasks/ID/result) of a task published early deletes its own node.
TEST_F(RolesBundle, AnotherClientWaitsForATaskPublishedEarlyAndConsumesIt) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            auto* other_zk = co_await session();
            task_client tc(*zk, layout_);
            task_client other(*other_zk, layout_);
            submit_options how;
            how.bundle = 3;
            auto ids = co_await tc.submit(sums(3), how);
            ASSERT_TRUE(ids) << ids.error().message();
            const std::string bundle(parse_task_ref((*ids)[2])->node);
            zkd::zkco::result<task_result> waited =
                zkd::zkco::error_code(zkd::zkco::errc::operation_timeout);
            zkd::reactor::task_group waits(ioc_.get_executor());
            waits.spawn([&]() -> asio::awaitable<void> {
                waited = co_await zkd::zkco::with_timeout(other.await_result((*ids)[2]), 30s);
            });
            task_result r;
            r.task = (*ids)[2];
            r.state = task_state::failed;
            r.error = task_error{"bad_args", "by hand"};
            r.attempt = 1;
            zkd::zkco::op::create c;
            c.path = entry_result_path(layout_, bundle, 2);
            c.data = encode(r);
            std::vector<zkd::zkco::multi_op> ops;
            ops.emplace_back(std::move(c));
            append_change_logs(ops);
            auto done = co_await zk->multi(std::move(ops));
            ASSERT_TRUE(done) << done.ec.message();
            co_await waits.async_wait(asio::use_awaitable);
            ASSERT_TRUE(waited) << waited.error().message();
            EXPECT_EQ(waited->state, task_state::failed);
            ASSERT_TRUE(waited->error);
            EXPECT_EQ(waited->error->code, "bad_args");
            ASSERT_TRUE(co_await other.consume((*ids)[2]));
            auto own = co_await zk->exists(entry_result_path(layout_, bundle, 2));
            ASSERT_TRUE(own);
            EXPECT_FALSE(*own);
        }(),
        120s
    );
}

TEST_F(RolesBundle, ABundleIsCancelledAsAWhole) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 3;
            std::vector<task_spec> reqs(6, task_spec{"sleep", json::value{{"ms", 60'000}}});
            // Two bundles of three: one runs (one slot), one waits.
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids);
            task_status st;
            for (int i = 0; i < 200 && st.state != task_state::running; ++i) {
                co_await settle(20ms);
                st = (co_await tc.status((*ids)[1])).value();
            }
            ASSERT_EQ(st.state, task_state::running);
            EXPECT_EQ((co_await tc.status((*ids)[4])).value().state, task_state::pending);
            // The task list shows each bundle once, with its size.
            auto list = co_await list_tasks(*zk, layout_);
            ASSERT_TRUE(list);
            ASSERT_EQ(list->pending.size(), 1U);
            EXPECT_EQ(list->pending.front().tasks, 3U);
            EXPECT_EQ(list->pending.front().id, std::string(parse_task_ref((*ids)[4])->node));
            ASSERT_EQ(list->assigned.size(), 1U);
            EXPECT_EQ(list->assigned.front().tasks, 3U);
            EXPECT_EQ(to_json(list->pending.front()).at("tasks"), 3);

            // A bundle's own id cancels all of it (one task's id cancels that task alone:
            // ACancelledTaskOfABundleEndsAloneAndTheOthersRun).
            ASSERT_TRUE(co_await tc.cancel(std::string(parse_task_ref((*ids)[2])->node)));
            ASSERT_TRUE(co_await tc.cancel(std::string(parse_task_ref((*ids)[3])->node)));
            auto got = co_await wait_all(tc, *ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->task, (*ids)[i]);
                EXPECT_EQ(got[i]->state, task_state::cancelled) << i;
            }
            EXPECT_EQ(co_await queued(*zk, true), 0U);
            EXPECT_TRUE((co_await zk->get_children("/cancel"s))->names.empty());
        }(),
        120s
    );
}

TEST_F(RolesBundle, ADepartedWorkersBundleIsRequeuedWhole) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            auto doomed = co_await start_worker("doomed", 1);
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 3;
            std::vector<task_spec> reqs(3, task_spec{"sleep", json::value{{"ms", 300}}});
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids);
            for (int i = 0; i < 200 && worker_stats_["doomed"].started < 1; ++i) {
                co_await settle(10ms);
            }
            ASSERT_EQ(worker_stats_["doomed"].started, 1U);
            co_await doomed.zk->close();
            co_await start_worker("heir", 1);
            auto got = co_await wait_all(tc, *ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->state, task_state::succeeded);
                EXPECT_EQ(got[i]->attempt, 2);
            }
            EXPECT_EQ(master_stats_.requeued, 1U);
            EXPECT_EQ(worker_stats_["heir"].published, 1U);
        }(),
        120s
    );
}

TEST_F(RolesBundle, ABigBundlesLongErrorsAreCutToFitItsResult) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 2);
            task_client tc(*zk, layout_);
            // 1,000 failing tasks in one bundle, each with a 479-byte message ("x" and two-byte
            // characters): more than each one's share of a result. Each is cut to its share,
            // between characters (else the result would not be JSON).
            std::string message = "x";
            for (int i = 0; i < 239; ++i) {
                message += "\xc3\xa9";  // é
            }
            std::vector<task_spec> reqs(1000, task_spec{"fail", json::value{{"message", message}}});
            submit_options how;
            how.bundle = 1000;
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids) << ids.error().message();
            ASSERT_EQ(ids->size(), 1000U);
            EXPECT_EQ(bundle_size(parse_task_ref(ids->front())->node), 1000U);
            const auto before = zk->counters();
            // 100 looks that consume nothing, then the 1,000 waits: the bundle's result
            // (hundreds of KB) is read once for the looks and once for the waits, not once
            // each; the rest are reads of the results directory's change log and listing.
            const std::vector<std::string> looked(ids->begin(), ids->begin() + 100);
            auto peeked = co_await wait_all(tc, looked, true);
            for (std::size_t i = 0; i < peeked.size(); ++i) {
                ASSERT_TRUE(peeked[i]) << i << ": " << peeked[i].error().message();
                EXPECT_EQ(peeked[i]->task, looked[i]);
                EXPECT_EQ(peeked[i]->state, task_state::failed);
            }
            auto got = co_await wait_all(tc, *ids);
            EXPECT_LE(zk->counters().reads - before.reads, 16U);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->state, task_state::failed);
                ASSERT_TRUE(got[i]->error);
                const auto& m = got[i]->error->message;
                EXPECT_LT(m.size(), message.size()) << i;
                EXPECT_GT(m.size(), 100U) << i;
                EXPECT_EQ(m.size() % 2, 1U) << i;  // "x" and whole characters
            }
        }(),
        120s
    );
}

TEST_F(RolesBundle, ABundleThatLiesAboutItsSizeEndsMalformed) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 2);
            task_client tc(*zk, layout_);
            // Written by hand: the id says 3 tasks, the node holds 2.
            task_id_generator gen(0xabcdef01U);
            const auto bid = bundle_id(gen.next(5, now_ms()), 3);
            task_spec spec;
            spec.type = "echo";
            spec.bundle = {1, 2};
            ASSERT_TRUE(co_await zk->create(layout_.pending_task(bid), encode(spec)));
            // And a bundle with garbage for data.
            const auto junk = bundle_id(gen.next(5, now_ms()), 2);
            ASSERT_TRUE(co_await zk->create(
                layout_.pending_task(junk), "{\"v\":1,\"type\":\"echo\",\"bundle\":7}"s
            ));
            // And a plain task under a bundle's name.
            const auto plain = bundle_id(gen.next(5, now_ms()), 2);
            task_spec alone;
            alone.type = "echo";
            ASSERT_TRUE(co_await zk->create(layout_.pending_task(plain), encode(alone)));

            std::vector<std::string> lied{
                bundled_task_id(bid, 0), bundled_task_id(bid, 2), bundled_task_id(junk, 1),
                bundled_task_id(plain, 1)};
            auto got = co_await wait_all(tc, lied);
            for (const auto& r : got) {
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::failed);
                ASSERT_TRUE(r->error);
                EXPECT_EQ(r->error->code, "malformed_task");
                // Failed by the master before any worker got it (protocol §4.1, §8), and
                // carrying the try it was on (§5).
                EXPECT_TRUE(r->worker.empty()) << r->worker;
                EXPECT_EQ(r->attempt, 1);
            }
            // The cluster carries on.
            submit_options how;
            how.bundle = 3;
            auto ids = co_await tc.submit(sums(3), how);
            ASSERT_TRUE(ids);
            auto ok = co_await wait_all(tc, *ids);
            for (const auto& r : ok) {
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
        }(),
        120s
    );
}

}  // namespace

// Automatic bundles (§4.1 "Automatic bundles"): many one-task submits at once are packed by
// the client itself; each task keeps its own id, result, wait and status; a lone submit goes
// at once, plain.
TEST_F(RolesBundle, ConcurrentOneTaskSubmitsAreBundledByTheClient) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 4);
            co_await start_worker("w2", 4);
            co_await workers_joined(*zk, 2);
            co_await master_says_entry_results(*zk);
            task_client tc(*zk, layout_);
            tc.auto_bundle(8);

            // A lone submit: nothing in flight, nothing to pack it with: a plain task.
            // (Named vectors: GCC 12 cannot hold an initializer_list across a co_await.)
            const std::vector<task_spec> lone_task{{"echo", "lone"}};
            auto lone = co_await tc.submit(lone_task);
            ASSERT_TRUE(lone) << lone.error().message();
            ASSERT_EQ(lone->size(), 1U);
            EXPECT_EQ(bundle_size(lone->front()), 0U);
            EXPECT_TRUE(is_valid_task_id(lone->front()));
            EXPECT_EQ(tc.auto_bundled(), 0U);

            // 40 one-task submits at once (and one that asks for retries, never packed).
            constexpr int n = 40;
            std::vector<std::string> ids(n + 1);
            {
                zkd::reactor::task_group submits(ioc_.get_executor());
                for (int i = 0; i <= n; ++i) {
                    submits.spawn([&, i]() -> asio::awaitable<void> {
                        submit_options how;
                        if (i == n) {
                            how.retries = 1;
                        }
                        auto r = co_await tc.submit(sums(1, i), how);
                        ASSERT_TRUE(r) << i << ": " << r.error().message();
                        ASSERT_EQ(r->size(), 1U);
                        ids[static_cast<std::size_t>(i)] = r->front();
                    });
                }
                co_await submits.async_wait(asio::use_awaitable);
            }
            std::set<std::string> distinct(ids.begin(), ids.end());
            EXPECT_EQ(distinct.size(), ids.size());  // every task an id of its own
            std::size_t bundled = 0;
            for (const auto& id : ids) {
                const auto ref = parse_task_ref(id);
                ASSERT_TRUE(ref) << id;
                if (ref->index) {
                    ++bundled;
                    EXPECT_LE(bundle_size(ref->node), 8U) << id;
                }
            }
            EXPECT_GT(bundled, 0U);
            EXPECT_EQ(tc.auto_bundled(), bundled);
            EXPECT_EQ(bundle_size(ids[n]), 0U);  // it asked for retries: alone

            // Status of a task inside an automatic bundle: its bundle's, then its own result.
            const auto in_bundle = std::find_if(ids.begin(), ids.end(), [](const auto& id) {
                return parse_task_ref(id)->index.has_value();
            });
            ASSERT_NE(in_bundle, ids.end());
            task_status st;
            for (int i = 0; i < 500 && !st.result; ++i) {
                st = (co_await tc.status(*in_bundle)).value();
                if (!st.result) {
                    co_await settle(10ms);
                }
            }
            ASSERT_TRUE(st.result);
            EXPECT_EQ(st.state, task_state::succeeded);
            EXPECT_EQ(st.result->task, *in_bundle);

            // Each wait gets exactly its task's result, in any order.
            std::reverse(ids.begin(), ids.end());
            auto got = co_await wait_all(tc, ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << ids[i] << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->task, ids[i]);
                EXPECT_EQ(got[i]->state, task_state::succeeded) << ids[i];
                const auto k = static_cast<std::int64_t>(n - i);
                EXPECT_EQ(got[i]->value.at("sum").to_number<std::int64_t>(), k + 1) << ids[i];
            }
            auto r = co_await zkd::zkco::with_timeout(tc.wait(lone->front()), 60s);
            ASSERT_TRUE(r);
            // Consumed (the consumes are written once flushed): unknown now, nothing left.
            co_await tc.flush();
            EXPECT_EQ((co_await tc.status(*in_bundle)).value().state, task_state::unknown);
            EXPECT_EQ(co_await queued(*zk, true), 0U);
            EXPECT_EQ(co_await queued(*zk, false), 0U);
        }(),
        120s
    );
}

// Automatic bundles go only while /master says every member follows early results (§4.1,
// §2 "Features"): a worker node of an older zkd (no "features") turns them off for as long
// as it is there; each burst's tasks then go one node each.
TEST_F(RolesBundle, AnOlderWorkerTurnsAutomaticBundlesOff) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 4);
            co_await workers_joined(*zk, 1);
            // 30 one-task submits at once through a new client: how many were bundled.
            const auto burst = [&]() -> asio::awaitable<std::uint64_t> {
                task_client tc(*zk, layout_);
                tc.auto_bundle(64);
                std::vector<std::string> ids(30);
                {
                    zkd::reactor::task_group submits(ioc_.get_executor());
                    for (int i = 0; i < 30; ++i) {
                        submits.spawn([&, i]() -> asio::awaitable<void> {
                            auto r = co_await tc.submit(sums(1, i));
                            EXPECT_TRUE(r) << i << ": " << r.error().message();
                            if (r) {
                                ids[static_cast<std::size_t>(i)] = r->front();
                            }
                        });
                    }
                    co_await submits.async_wait(asio::use_awaitable);
                }
                auto got = co_await wait_all(tc, ids);
                for (std::size_t i = 0; i < got.size(); ++i) {
                    EXPECT_TRUE(got[i] && got[i]->state == task_state::succeeded) << ids[i];
                }
                co_return tc.auto_bundled();
            };
            co_await master_says_entry_results(*zk);
            EXPECT_GT(co_await burst(), 0U);

            // An older worker joins (it serves nothing, so no task goes there).
            member_info old;
            old.id = "old";
            old.host = "h";
            old.capacity = 1;
            old.types = {"nothing_here"};
            const auto path = layout::worker(old.id);
            ASSERT_TRUE(co_await zk->create(path, encode(old), {zkd::zkco::create_mode::ephemeral})
            );
            co_await master_says_entry_results(*zk, false);
            EXPECT_EQ(co_await burst(), 0U);

            // Gone again: automatic bundles are back.
            ASSERT_TRUE(co_await zk->remove(path));
            co_await master_says_entry_results(*zk);
            EXPECT_GT(co_await burst(), 0U);
        }(),
        120s
    );
}

// A cancel of a task inside an automatic bundle: its wait says cancelled as for a plain task,
// and its neighbours are cancelled by their own ids alone.
TEST_F(RolesBundle, ACancelledTaskOfAnAutomaticBundleEndsCancelled) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 1);
            co_await workers_joined(*zk, 1);
            co_await master_says_entry_results(*zk);
            task_client tc(*zk, layout_);
            tc.auto_bundle(4);
            // Occupy the only slot, then submit four at once: held, then packed together.
            const std::vector<task_spec> sleeper{{"sleep", json::object{{"ms", 60'000}}}};
            auto busy = co_await tc.submit(sleeper);
            ASSERT_TRUE(busy);
            std::vector<std::string> ids(4);
            {
                zkd::reactor::task_group submits(ioc_.get_executor());
                for (auto& slot : ids) {
                    submits.spawn([&tc, &sleeper, &slot]() -> asio::awaitable<void> {
                        auto r = co_await tc.submit(sleeper);
                        ASSERT_TRUE(r) << r.error().message();
                        slot = r->front();
                    });
                }
                co_await submits.async_wait(asio::use_awaitable);
            }
            // Packed (into bundles spread over the worker's threads): ids[2]'s bundle holds
            // at least one other task.
            const auto node_of = [](const std::string& id) {
                const auto ref = parse_task_ref(id);
                return ref && ref->index ? std::string(ref->node) : id;
            };
            ASSERT_TRUE(parse_task_ref(ids[2])->index) << ids[2];
            EXPECT_EQ((co_await tc.status(ids[2])).value().state, task_state::pending);
            ASSERT_TRUE(co_await tc.cancel(ids[2]));
            // One task of a bundle is cancelled alone (§6 T7), and its result comes with its
            // bundle's (§5.1): each task here is cancelled by its own id, and each ends with
            // its own result. (A request for a task of a pending bundle stands until the
            // bundle is assigned: the busy slot goes first.)
            ASSERT_TRUE(co_await tc.cancel(busy->front()));
            std::vector<std::string> others{busy->front()};
            for (std::size_t i = 0; i < ids.size(); ++i) {
                others.push_back(ids[i]);
                if (i != 2) {
                    ASSERT_TRUE(co_await tc.cancel(ids[i]));
                }
            }
            EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [&](const auto& id) {
                return id != ids[2] && node_of(id) == node_of(ids[2]);
            }));
            auto rest = co_await wait_all(tc, others);
            for (std::size_t i = 0; i < rest.size(); ++i) {
                ASSERT_TRUE(rest[i]) << others[i] << ": " << rest[i].error().message();
                EXPECT_EQ(rest[i]->task, others[i]);
                EXPECT_EQ(rest[i]->state, task_state::cancelled) << others[i];
                ASSERT_TRUE(rest[i]->error);
                EXPECT_EQ(rest[i]->error->code, "cancelled");
            }
            co_await tc.flush();
            EXPECT_EQ(co_await queued(*zk, true), 0U);
            EXPECT_EQ(co_await queued(*zk, false), 0U);
        }(),
        120s
    );
}

TEST_F(RolesBundle, ACancelledTaskOfABundleEndsAloneAndTheOthersRun) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            auto w1 = co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 5;
            // Five sleeps on a pool of two threads: task 2 runs or waits for a thread when its
            // cancel comes; either way it alone ends cancelled.
            std::vector<task_spec> reqs(5, task_spec{"sleep", json::value{{"ms", 1500}}});
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids);
            ASSERT_EQ(bundle_size(parse_task_ref((*ids)[0])->node), 5U);
            task_status st;
            for (int i = 0; i < 500 && st.state != task_state::running; ++i) {
                co_await settle(10ms);
                st = (co_await tc.status((*ids)[2])).value();
            }
            ASSERT_EQ(st.state, task_state::running);
            ASSERT_TRUE(co_await tc.cancel((*ids)[2]));
            auto got = co_await wait_all(tc, *ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->task, (*ids)[i]);
                if (i == 2) {
                    EXPECT_EQ(got[i]->state, task_state::cancelled);
                    ASSERT_TRUE(got[i]->error);
                    EXPECT_EQ(got[i]->error->code, "cancelled");
                } else {
                    EXPECT_EQ(got[i]->state, task_state::succeeded) << i;
                    EXPECT_EQ(got[i]->value, (json::value{{"slept_ms", 1500}})) << i;
                }
            }
            EXPECT_EQ(worker_stats_["w1"].published, 1U);  // one result, the bundle's
            EXPECT_EQ(master_stats_.cancelled, 1U);        // the marker's T7
            EXPECT_TRUE((co_await zk->get_children("/cancel"s))->names.empty());
            // The task's marker goes once the bundle's result is written.
            const auto dir = layout::assign_dir(w1.me.id);
            std::size_t left = 1;
            for (int i = 0; i < 200 && left != 0; ++i) {
                left = (co_await zk->get_children(dir))->names.size();
                if (left != 0) {
                    co_await settle(10ms);
                }
            }
            EXPECT_EQ(left, 0U);
        }(),
        120s
    );
}

TEST_F(RolesBundle, ATaskOfAPendingBundleCancelledEndsCancelledAndTheOthersRun) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 3;
            // No worker yet: the bundle waits in pending, and so does the request for its task.
            std::vector<task_spec> reqs(3, task_spec{"sleep", json::value{{"ms", 2000}}});
            auto ids = co_await tc.submit(reqs, how);
            ASSERT_TRUE(ids);
            ASSERT_TRUE(co_await tc.cancel((*ids)[1]));
            co_await settle(300ms);
            EXPECT_EQ((co_await tc.status((*ids)[1])).value().state, task_state::pending);
            EXPECT_EQ((co_await zk->get_children("/cancel"s))->names.size(), 1U);
            co_await start_worker("w1", 1);
            auto got = co_await wait_all(tc, *ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->state, i == 1 ? task_state::cancelled : task_state::succeeded)
                    << i;
            }
            EXPECT_TRUE((co_await zk->get_children("/cancel"s))->names.empty());
        }(),
        120s
    );
}

namespace {

/// `type`: counts its runs per argument (an integer); argument 2 fails its first run, 4
/// always fails with bad_args (no retry mends it), the others succeed at once, their value the
/// run's count.
struct flaky_runs {
    std::mutex m;
    std::map<std::int64_t, int> runs;
};

std::shared_ptr<flaky_runs> add_flaky(zkd::handlers::registry& reg, const std::string& type) {
    auto f = std::make_shared<flaky_runs>();
    reg.add(type, [f](const json::value& args, std::stop_token) -> zkd::handlers::handler_result {
        const auto k = args.as_int64();
        int n = 0;
        {
            const std::lock_guard lock(f->m);
            n = ++f->runs[k];
        }
        if (k == 4) {
            return zkd::handlers::handler_error{"bad_args", "never"};
        }
        if (k == 2 && n == 1) {
            return zkd::handlers::handler_error{"handler_error", "first run fails"};
        }
        return json::value(n);
    });
    return f;
}

/// A bundle of flaky tasks 0..4 whose tries retry (its own `retries`, or the worker's
/// default): only task 2 runs again.
void expect_only_the_failed_task_reran(
    const std::vector<zkd::zkco::result<task_result>>& got,
    const std::vector<std::string>& ids,
    flaky_runs& f
) {
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
        EXPECT_EQ(got[i]->task, ids[i]);
        if (i == 4) {
            EXPECT_EQ(got[i]->state, task_state::failed);
            ASSERT_TRUE(got[i]->error);
            EXPECT_EQ(got[i]->error->code, "bad_args");
        } else {
            EXPECT_EQ(got[i]->state, task_state::succeeded) << i;
            // Each ran once, but task 2, which ran twice: its second run's value.
            EXPECT_EQ(got[i]->value, json::value(i == 2 ? 2 : 1)) << i;
        }
    }
    const std::lock_guard lock(f.m);
    EXPECT_EQ(f.runs, (std::map<std::int64_t, int>{{0, 1}, {1, 1}, {2, 2}, {3, 1}, {4, 1}}));
}

std::vector<task_spec> flaky_tasks(const std::string& type) {
    std::vector<task_spec> reqs;
    for (std::int64_t k = 0; k < 5; ++k) {
        reqs.push_back({type, json::value(k)});
    }
    return reqs;
}

}  // namespace

TEST_F(RolesBundle, ABundleRetriesOnlyItsFailedTasks) {
    const auto flaky = add_flaky(registry_, "flaky");
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 5;
            how.retries = 3;
            how.backoff = backoff_policy{0, 1ms, 1ms};
            auto ids = co_await tc.submit(flaky_tasks("flaky"), how);
            ASSERT_TRUE(ids);
            ASSERT_EQ(bundle_size(parse_task_ref((*ids)[0])->node), 5U);
            auto got = co_await wait_all(tc, *ids);
            expect_only_the_failed_task_reran(got, *ids, *flaky);
            EXPECT_EQ(worker_stats_["w1"].retried, 1U);    // one retry node, for task 2
            EXPECT_EQ(worker_stats_["w1"].published, 2U);  // the retry node, then the result
        }(),
        120s
    );
}

TEST_F(RolesBundle, AWorkersDefaultRetriesRerunOnlyABundlesFailedTasks) {
    // zkd run --retry flaky=1:1ms: the bundle asks for nothing, its worker retries it.
    const auto flaky = add_flaky(registry_, "flaky");
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            worker_options opts;
            opts.retry_defaults["flaky"] = backoff_policy{1, 1ms, 1ms};
            co_await start_worker("w1", 1, {}, opts);
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 5;
            auto ids = co_await tc.submit(flaky_tasks("flaky"), how);
            ASSERT_TRUE(ids);
            auto got = co_await wait_all(tc, *ids);
            expect_only_the_failed_task_reran(got, *ids, *flaky);
            EXPECT_EQ(worker_stats_["w1"].retried, 1U);
        }(),
        120s
    );
}

TEST_F(RolesBundle, ARetryingBundleCancelledWholeKeepsWhatItsFirstTryFinished) {
    // Task 2 fails its first run; the retry waits a long while (a random time in [0, 24 h]).
    // Cancelled whole meanwhile, the bundle's result is the master's (§5.1): the tasks its
    // first try finished keep their outcomes, only task 2 is cancelled.
    const auto flaky = add_flaky(registry_, "flaky");
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            submit_options how;
            how.bundle = 5;
            how.retries = 3;
            how.backoff = backoff_policy{0, 24h, 24h};
            auto ids = co_await tc.submit(flaky_tasks("flaky"), how);
            ASSERT_TRUE(ids);
            const std::string bundle(parse_task_ref((*ids)[0])->node);
            while (worker_stats_["w1"].retried == 0) {
                co_await zkd::zkco::pause(10ms);
            }
            ASSERT_TRUE(co_await tc.cancel(bundle));
            auto got = co_await wait_all(tc, *ids);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(got[i]) << i << ": " << got[i].error().message();
                EXPECT_EQ(got[i]->try_number, 2) << i << ": the retry's";
                EXPECT_EQ(got[i]->errors.size(), 1U) << i;
                if (i == 2) {
                    EXPECT_EQ(got[i]->state, task_state::cancelled);
                } else if (i == 4) {
                    EXPECT_EQ(got[i]->state, task_state::failed);
                    ASSERT_TRUE(got[i]->error);
                    EXPECT_EQ(got[i]->error->code, "bad_args");
                } else {
                    EXPECT_EQ(got[i]->state, task_state::succeeded) << i;
                    EXPECT_EQ(got[i]->value, json::value(1)) << i;
                }
            }
            const std::lock_guard lock(flaky->m);
            EXPECT_EQ(flaky->runs[2], 1) << "its retry never ran";
        }(),
        120s
    );
}

}  // namespace ZKD_UNITY_ID
