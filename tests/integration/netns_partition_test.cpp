// SPDX-License-Identifier: MIT
// Network partitions of real `zkd run` processes: one node runs in a network namespace of its
// own (support/netns.hpp) and reaches ZooKeeper, which listens on loopback, through a relay on
// the host end of a veth pair. Taking that link down cuts the node off the way a network does
// it: packets are dropped, nothing is reset. A worker cut off past its session timeout loses
// its tasks to another worker and its late results go nowhere; a master cut off past it
// stands down before another takes over (measured from both processes'
// logs); a partition shorter than the session timeout changes nothing. Needs root (CI runs
// as root): without it every test here fails, saying so.
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/netns.hpp"
#include "support/processes.hpp"
#include "support/relay.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;

namespace {

/// One line of a node's log (`zkd run --log-format json`).
struct log_line {
    std::int64_t ms = 0;  ///< wall clock, ms since the epoch (all nodes run on this machine)
    std::string msg;
};

/// "2026-11-23T21:18:54.123Z" as ms since the epoch; 0 if it is not that.
std::int64_t parse_time(const std::string& s) {
    std::tm tm{};
    int ms = 0;
    if (std::sscanf(
            s.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
            &tm.tm_min, &tm.tm_sec, &ms
        ) != 7) {
        return 0;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<std::int64_t>(::timegm(&tm)) * 1000 + ms;
}

std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()
    )
        .count();
}

/// The first line from `from` on whose message contains one of `needles`.
std::optional<log_line> first_of(
    const std::vector<log_line>& lines,
    std::int64_t from,
    std::initializer_list<std::string_view> needles
) {
    for (const auto& l : lines) {
        if (l.ms < from) {
            continue;
        }
        for (const auto n : needles) {
            if (l.msg.find(n) != std::string::npos) {
                return l;
            }
        }
    }
    return std::nullopt;
}

/// The name in `names` that is a member id of `host` ("<host>-<pid>-<hex>"), or "".
std::string member_of(const std::vector<std::string>& names, const std::string& host) {
    for (const auto& n : names) {
        if (n.rfind(host + "-", 0) == 0) {
            return n;
        }
    }
    return "";
}

/// Records a fatal failure from SetUp (the test body then does not run) without the noise of
/// GTEST_FAIL's exception there (support/co_assert.hpp makes it throw).
void fail_setup(const std::string& why) {
    try {
        GTEST_FAIL() << why;
    } catch (const zkd::test::fatal_failure&) {
    }
}

class NetnsPartition : public zkd::test::zk_test {
protected:
    void SetUp() override {
        // The suite never skips these: CI runs as root, and a run that is not says why.
        if (const auto why = zkd::test::netns_unavailable(); !why.empty()) {
            fail_setup("this test cuts real processes off with a network namespace: " + why);
            return;
        }
        zk_test::SetUp();
        if (HasFatalFailure() || IsSkipped()) {
            return;
        }
        dir_ = zkd::test::make_test_dir(
            "netns", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
        try {
            net_.emplace();
        } catch (const std::exception& e) {
            fail_setup(std::string("cannot make a network namespace: ") + e.what());
            return;
        }
        // The cut-off node reaches ZooKeeper (on loopback) through this relay on the host end.
        relay_.emplace(ioc_, base_, net_->host_address());
        ns_ = "part";
        zk_ = base_ + chroot_;
    }

    void TearDown() override {
        nodes_.clear();
        relay_.reset();
        net_.reset();
        if (!dir_.empty()) {
            if (HasFailure()) {
                zkd::test::print_logs(dir_, 6000);
            }
            std::filesystem::remove_all(dir_);
        }
        zk_test::TearDown();
    }

    /// Starts `zkd run` as `host` (its log: <dir>/<host>.log, JSON lines); `cut_off`: inside
    /// the namespace, through the relay.
    void start(const std::string& host, std::vector<std::string> extra, bool cut_off = false) {
        extra.insert(extra.begin(), {"--log-format", "json"});
        nodes_.emplace(
            host, std::make_unique<zkd::test::zkd_process>(
                      ZKD_BINARY, cut_off ? relay_->address() + chroot_ : zk_, ns_, host,
                      dir_ / (host + ".log"), std::move(extra), cut_off ? net_->path() : ""
                  )
        );
    }

    [[nodiscard]] std::string log_of(const std::string& host) const {
        std::ifstream in(dir_ / (host + ".log"));
        return {std::istreambuf_iterator<char>(in), {}};
    }

    [[nodiscard]] std::vector<log_line> log_lines(const std::string& host) const {
        std::vector<log_line> out;
        std::istringstream in(log_of(host));
        for (std::string line; std::getline(in, line);) {
            boost::system::error_code ec;
            const auto v = json::parse(line, ec);
            if (ec || !v.is_object() || !v.as_object().contains("time") ||
                !v.as_object().contains("msg")) {
                continue;  // not a log line of ours (say, a message from before logging was set up)
            }
            const auto* time = v.as_object().at("time").if_string();
            const auto* msg = v.as_object().at("msg").if_string();
            if (time != nullptr && msg != nullptr) {
                out.push_back({parse_time(std::string(*time)), std::string(*msg)});
            }
        }
        return out;
    }

    asio::awaitable<void> settle(std::chrono::milliseconds d) {
        asio::steady_timer t(ioc_, d);
        co_await t.async_wait(asio::use_awaitable);
    }

    /// Waits until the coroutine `check()` yields true, trying every 50 ms; false after `limit`.
    template <class Check>
    asio::awaitable<bool> until(Check check, std::chrono::milliseconds limit) {
        const auto end = std::chrono::steady_clock::now() + limit;
        for (;;) {
            const bool ok = co_await check();
            if (ok) {
                co_return true;
            }
            if (std::chrono::steady_clock::now() >= end) {
                co_return false;
            }
            co_await settle(50ms);
        }
    }

    /// A client on the cluster's namespace (on loopback, never cut off), once a node made it.
    asio::awaitable<std::unique_ptr<zkd::zkco::client>> cluster_client() {
        zkd::zkco::config cfg = make_config();
        cfg.connect_string = zk_ + chroot_path(ns_);
        for (int i = 0; i < 300; ++i) {
            auto zk = std::make_unique<zkd::zkco::client>(ioc_.get_executor(), cfg);
            auto c = co_await zkd::zkco::with_timeout(zk->connect(), 10s);
            bool ready = false;
            if (c) {
                const auto meta = co_await zk->exists("/meta"s);
                ready = meta && meta->has_value();
            }
            if (ready) {
                co_return zk;
            }
            co_await zk->close();
            co_await settle(50ms);
        }
        throw std::runtime_error("the cluster's namespace never appeared");
    }

    static asio::awaitable<std::vector<std::string>> children(
        zkd::zkco::client& zk, std::string path
    ) {
        auto kids = co_await zk.get_children(path);
        co_return kids ? kids->names : std::vector<std::string>{};
    }

    /// What /master says, once it says something.
    asio::awaitable<std::optional<member_info>> master(zkd::zkco::client& zk) {
        for (int i = 0; i < 300; ++i) {
            if (auto m = co_await zk.get("/master"s); m) {
                if (auto info = decode_master(m->data)) {
                    co_return *info;
                }
            }
            co_await settle(50ms);
        }
        co_return std::nullopt;
    }

    /// What is left where a finished, consumed task leaves nothing: pending tasks, results,
    /// assignments, and the assignment directories of members that are gone.
    static asio::awaitable<std::string> left_behind(zkd::zkco::client& zk, const layout& l) {
        std::string left;
        for (const auto& shard : l.pending_shard_paths()) {
            const auto tasks = co_await children(zk, shard);
            for (const auto& n : tasks) {
                left += " pending " + n;
            }
        }
        auto result_dirs = co_await zkd::roles::list_result_dirs(zk);
        if (!result_dirs) {
            left += " /results unreadable: " + result_dirs.error().message();
        }
        for (const auto& dir : result_dirs ? *result_dirs : std::vector<std::string>{}) {
            const auto results = co_await children(zk, dir);
            for (const auto& n : results) {
                left += " result " + n;
            }
        }
        const auto workers = co_await children(zk, layout::workers_dir());
        const auto dirs = co_await children(zk, layout::assign_dir());
        for (const auto& member : dirs) {
            if (std::find(workers.begin(), workers.end(), member) == workers.end()) {
                left += " directory of departed " + member;
            }
            const auto assigned = co_await children(zk, layout::assign_dir(member));
            for (const auto& n : assigned) {
                left.append(" assignment ").append(member).append("/").append(n);
            }
        }
        co_return left;
    }

    std::filesystem::path dir_;
    std::optional<zkd::test::netns> net_;
    std::optional<zkd::test::relay> relay_;
    std::string ns_;
    std::string zk_;  ///< what the nodes on the host and the test's clients connect to
    std::map<std::string, std::unique_ptr<zkd::test::zkd_process>> nodes_;
};

TEST_F(
    NetnsPartition, AWorkerCutOffPastItsSessionLosesItsTasksToAnotherAndItsLateResultsGoNowhere
) {
    run(
        [&]() -> asio::awaitable<void> {
            start("boss", {"--role", "standby"});  // the master; works nothing itself
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            start("other", {"--role", "worker"});
            start("cut", {"--role", "worker"}, true);
            std::string cut_member;
            auto joined = [&]() -> asio::awaitable<bool> {
                const auto w = co_await children(*zk, "/workers"s);
                cut_member = member_of(w, "cut");
                co_return !cut_member.empty() && !member_of(w, "other").empty();
            };
            bool ok = co_await until(joined, 30s);
            ASSERT_TRUE(ok) << "the workers never joined";

            // 4 slots, 4 tasks of 1.5 s: each worker runs two. Cut the link while they run.
            std::vector<task_spec> reqs(4, task_spec{"sleep", json::value{{"ms", 1500}}});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            std::vector<std::string> on_cut;
            auto all_running = [&]() -> asio::awaitable<bool> {
                on_cut.clear();
                int running = 0;
                for (const auto& id : *ids) {
                    auto st = co_await tc.status(id);
                    running += st && st->state == task_state::running ? 1 : 0;
                    if (st && st->worker == cut_member) {
                        on_cut.push_back(id);
                    }
                }
                co_return running == 4;
            };
            ok = co_await until(all_running, 20s);
            ASSERT_TRUE(ok) << "the tasks never all ran";
            ASSERT_FALSE(on_cut.empty()) << "the worker to cut off got no task";
            net_->cut();

            // ZooKeeper expires its session (the test's client, on loopback, sees its node go).
            auto expired = [&]() -> asio::awaitable<bool> {
                const auto w = co_await children(*zk, "/workers"s);
                co_return std::find(w.begin(), w.end(), cut_member) == w.end();
            };
            ok = co_await until(expired, 20s);
            ASSERT_TRUE(ok) << "the cut-off worker's session never expired";

            // Every task ends with its one result; what the cut-off worker held ran again on the
            // other worker.
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << id << ": " << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << id;
                const bool was_cut = std::find(on_cut.begin(), on_cut.end(), id) != on_cut.end();
                EXPECT_EQ(r->attempt, was_cut ? 2 : 1) << id;
                EXPECT_EQ(r->worker.rfind("other-", 0), 0U) << id << " published by " << r->worker;
            }

            // Healed: the cut-off worker learns that its session is gone, and rejoins as a new
            // member; what it finished while cut off was never published.
            net_->heal();
            std::string rejoined;
            auto back = [&]() -> asio::awaitable<bool> {
                const auto w = co_await children(*zk, "/workers"s);
                rejoined = member_of(w, "cut");
                co_return !rejoined.empty() &&
                    log_of("cut").find("rejoining as a new member") != std::string::npos;
            };
            ok = co_await until(back, 30s);
            ASSERT_TRUE(ok) << "the cut-off worker did not come back";
            EXPECT_NE(rejoined, cut_member);
            for (const auto& id : on_cut) {
                EXPECT_NE(log_of("cut").find("cannot publish " + id), std::string::npos)
                    << "the cut-off worker did not try to publish " << id
                    << " (it should have finished it)";
            }
            // No second result, nothing pending, no assignment (nor the old member's directory).
            co_await tc.flush();
            std::string left;
            auto clean = [&]() -> asio::awaitable<bool> {
                left = co_await left_behind(*zk, *l);
                co_return left.empty();
            };
            ok = co_await until(clean, 10s);
            EXPECT_TRUE(ok) << "left behind:" << left;
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(
    NetnsPartition, AMasterCutOffPastItsSessionStandsDownBeforeANewOneActsAndRejoinsAfterTheHeal
) {
    run(
        [&]() -> asio::awaitable<void> {
            start("old", {}, true);  // works and runs for master, from inside the namespace
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const auto first = co_await master(*zk);
            ASSERT_TRUE(first);
            ASSERT_EQ(first->host, "old");
            const auto epoch_at_start = co_await zk->exists("/epoch"s);
            ASSERT_TRUE(epoch_at_start && *epoch_at_start);
            const auto epoch_old = (*epoch_at_start)->version;
            start("new", {});
            auto candidates = [&]() -> asio::awaitable<bool> {
                const auto w = co_await children(*zk, "/workers"s);
                const auto e = co_await children(*zk, "/election"s);
                co_return w.size() == 2 && e.size() == 2;
            };
            bool ok = co_await until(candidates, 30s);
            ASSERT_TRUE(ok) << "the second node never joined";
            std::vector<task_spec> warm(6, task_spec{"echo", json::value("before")});
            auto before = co_await tc.submit(std::move(warm));
            ASSERT_TRUE(before);
            for (const auto& id : *before) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }

            const std::int64_t cut_ms = wall_ms();
            net_->cut();
            // Submitted while the master is cut off: the next master assigns them.
            std::vector<task_spec> more(6, task_spec{"echo", json::value("during")});
            auto during = co_await tc.submit(std::move(more));
            ASSERT_TRUE(during);
            std::optional<member_info> now;
            auto replaced = [&]() -> asio::awaitable<bool> {
                now = co_await master(*zk);
                co_return now && now->host == "new";
            };
            ok = co_await until(replaced, 20s);
            ASSERT_TRUE(ok) << "no new master while the old one is cut off";
            const auto epoch_taken = co_await zk->exists("/epoch"s);
            ASSERT_TRUE(epoch_taken && *epoch_taken);
            const auto epoch_new = (*epoch_taken)->version;
            EXPECT_GT(epoch_new, epoch_old);
            for (const auto& id : *during) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
                EXPECT_EQ(r->worker.rfind("new-", 0), 0U) << r->worker;
            }

            // Healed: the old node finds its session expired and comes back as a new member, a
            // candidate behind the new master and a worker.
            net_->heal();
            auto rejoined = [&]() -> asio::awaitable<bool> {
                const auto w = co_await children(*zk, "/workers"s);
                const auto e = co_await children(*zk, "/election"s);
                const std::string member = member_of(w, "old");
                const bool candidate = std::any_of(e.begin(), e.end(), [&](const std::string& c) {
                    return !member.empty() && c.rfind("c-" + member + "-", 0) == 0;
                });
                co_return member !=
                    first->id&& candidate&& log_of("old").find("rejoining as a new member") !=
                    std::string::npos;
            };
            ok = co_await until(rejoined, 30s);
            ASSERT_TRUE(ok) << "the old master did not come back as a candidate and worker";

            // The old master stopped acting (stood down, was deposed, or lost its session:
            // whichever it logged first) before the new one was even elected.
            const auto old_log = log_lines("old");
            const auto new_log = log_lines("new");
            const auto acted = first_of(old_log, 0, {"acting with epoch"});
            ASSERT_TRUE(acted) << "the old master never said it acted";
            const auto stood_down = first_of(
                old_log, cut_ms,
                {"not acting as master", "deposed", "stops watching", "no longer master",
                 "declared expired", "expired", "rejoining as a new member"}
            );
            const auto elected = first_of(new_log, cut_ms, {"elected master"});
            const auto acting = first_of(new_log, cut_ms, {"acting with epoch"});
            ASSERT_TRUE(stood_down) << "the old master never stopped acting";
            ASSERT_TRUE(elected);
            ASSERT_TRUE(acting);
            std::cout << "cut at 0 ms; old master stopped acting at " << stood_down->ms - cut_ms
                      << " ms (" << stood_down->msg << "); new master elected at "
                      << elected->ms - cut_ms << " ms, acting at " << acting->ms - cut_ms << " ms ("
                      << acting->msg << ")\n";
            RecordProperty("old_master_stood_down_ms", static_cast<int>(stood_down->ms - cut_ms));
            RecordProperty("new_master_elected_ms", static_cast<int>(elected->ms - cut_ms));
            RecordProperty("new_master_acting_ms", static_cast<int>(acting->ms - cut_ms));
            EXPECT_LT(stood_down->ms, elected->ms)
                << "the cut-off master believed it was master until " << stood_down->ms - acting->ms
                << " ms after the new one acted";
            EXPECT_EQ(first_of(old_log, cut_ms, {"acting again"}), std::nullopt)
                << "the cut-off master acted again after the heal";

            // Tasks flow on; the new master stays, with its epoch (nothing of the old one's
            // applied).
            std::vector<task_spec> after(4, task_spec{"echo", json::value("after")});
            auto after_ids = co_await tc.submit(std::move(after));
            ASSERT_TRUE(after_ids);
            for (const auto& id : *after_ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
            const auto last = co_await master(*zk);
            ASSERT_TRUE(last);
            EXPECT_EQ(last->host, "new");
            const auto epoch_at_end = co_await zk->exists("/epoch"s);
            ASSERT_TRUE(epoch_at_end && *epoch_at_end);
            EXPECT_EQ((*epoch_at_end)->version, epoch_new);
            co_await tc.flush();
            std::string left;
            auto clean = [&]() -> asio::awaitable<bool> {
                left = co_await left_behind(*zk, *l);
                co_return left.empty();
            };
            ok = co_await until(clean, 10s);
            EXPECT_TRUE(ok) << "left behind:" << left;
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(NetnsPartition, APartitionShorterThanTheSessionTimeoutRequeuesNothing) {
    run(
        [&]() -> asio::awaitable<void> {
            start("boss", {"--role", "standby"});
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            // 4 s sessions (the test server's most), cut off for 1 s.
            start("cut", {"--role", "worker", "--session-timeout", "4000"}, true);
            std::string cut_member;
            auto joined = [&]() -> asio::awaitable<bool> {
                const auto w = co_await children(*zk, "/workers"s);
                cut_member = member_of(w, "cut");
                co_return !cut_member.empty();
            };
            bool ok = co_await until(joined, 30s);
            ASSERT_TRUE(ok) << "the worker never joined";

            // Two run (its 2 slots) and finish while it is cut off; two wait for the slots.
            std::vector<task_spec> reqs(4, task_spec{"sleep", json::value{{"ms", 400}}});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            auto two_running = [&]() -> asio::awaitable<bool> {
                int running = 0;
                for (const auto& id : *ids) {
                    auto st = co_await tc.status(id);
                    running += st && st->state == task_state::running ? 1 : 0;
                }
                co_return running == 2;
            };
            ok = co_await until(two_running, 20s);
            ASSERT_TRUE(ok) << "the tasks never ran";
            net_->cut();
            co_await settle(1000ms);  // the partition itself: a quarter of the session timeout
            const std::int64_t healed_ms = wall_ms();
            net_->heal();

            int finished_while_cut = 0;
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << id << ": " << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << id;
                EXPECT_EQ(r->attempt, 1) << id << " ran twice";
                EXPECT_EQ(r->worker, cut_member) << id;
                finished_while_cut += r->finished_ms < healed_ms ? 1 : 0;
            }
            // The partition held back results: what finished behind it was published after it.
            EXPECT_GE(finished_while_cut, 1);
            // The same session, the same member: nothing expired, nothing was requeued.
            const auto workers = co_await children(*zk, "/workers"s);
            EXPECT_EQ(member_of(workers, "cut"), cut_member);
            EXPECT_EQ(log_of("cut").find("rejoining as a new member"), std::string::npos);
            EXPECT_EQ(log_of("cut").find("expired"), std::string::npos);
            EXPECT_EQ(log_of("boss").find("requeued"), std::string::npos);
            EXPECT_EQ(log_of("boss").find("worker " + cut_member + " left"), std::string::npos);
            co_await tc.flush();
            std::string left;
            auto clean = [&]() -> asio::awaitable<bool> {
                left = co_await left_behind(*zk, *l);
                co_return left.empty();
            };
            ok = co_await until(clean, 10s);
            EXPECT_TRUE(ok) << "left behind:" << left;
            co_await zk->close();
        }(),
        120s
    );
}

}  // namespace

}  // namespace ZKD_UNITY_ID
