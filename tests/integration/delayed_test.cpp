// SPDX-License-Identifier: MIT
// Delayed tasks and retries (docs/protocol.md §4.3, §6 "Delayed tasks and retries") through
// real `zkd run` processes and a real ZooKeeper: a delayed task never starts before its time
// (its id carries it, its result says when it started), tasks start in the order of their
// due times, a cancel ends a delayed task, a master SIGKILLed while 1,000 wait loses none and
// starts none early, and a program that fails twice then succeeds ends `succeeded` at try 3
// with two recorded errors and waits that grow with the backoff.
#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;

namespace {

class Delayed : public zkd::test::zk_test {  // NOLINT(readability-identifier-naming)
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "delayed", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
    }

    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 4000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    [[nodiscard]] std::string connect() const { return base_ + chroot_; }

    zkd::test::zkd_process& start_node(
        const std::string& host, std::vector<std::string> extra, bool short_session = true
    ) {
        nodes_.push_back(std::make_unique<zkd::test::zkd_process>(
            ZKD_BINARY, connect(), ns_, host, dir_ / (host + ".log"), std::move(extra), "",
            short_session
        ));
        return *nodes_.back();
    }

    zkd::test::command_result zkd(std::vector<std::string> args, std::chrono::seconds t = 60s) {
        args.insert(args.begin(), ZKD_BINARY);
        args.insert(args.end(), {"--zk", connect(), "--namespace", ns_});
        return zkd::test::run_command(args, {}, t);
    }

    /// Waits (at most 30 s) until `zkd cluster --json` shows a master and `workers` workers.
    void wait_up(std::size_t workers) {
        for (int i = 0; i < 600; ++i) {
            const auto c = zkd({"cluster", "--json"});
            boost::system::error_code ec;
            const auto v = c.exit_code == 0 ? json::parse(c.out, ec) : json::value();
            if (!ec && v.is_object() && v.at("master").is_object() &&
                v.at("workers").as_array().size() == workers) {
                return;
            }
            std::this_thread::sleep_for(50ms);
        }
        FAIL() << "the cluster did not come up";
    }

    /// `zkd submit` of an echo task with `extra` flags: its id.
    std::string submit(std::vector<std::string> extra, const std::string& type = "echo") {
        std::vector<std::string> args{"submit", type, "1"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = zkd(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        auto id = r.out;
        while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) {
            id.pop_back();
        }
        return id;
    }

    /// `zkd wait ID`: the result as JSON (null if none came).
    json::value wait(const std::string& id) {
        const auto r = zkd({"wait", id, "--timeout", "60s"}, 90s);
        boost::system::error_code ec;
        auto v = json::parse(r.out, ec);
        EXPECT_FALSE(ec) << id << ": " << r.out << r.err;
        return ec ? json::value() : v;
    }

    std::string ns_ = "dl";
    std::filesystem::path dir_;
    std::vector<std::unique_ptr<zkd::test::zkd_process>> nodes_;
};

std::int64_t due_of(const std::string& id) {
    return zkd::protocol::task_id_ms(id).value_or(-1);
}

}  // namespace

TEST_F(Delayed, NeverBeforeItsTimeAndInTheOrderOfDueTimes) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("n1", {"--capacity", "4"});
    wait_up(1);
    const auto late = submit({"--delay", "3s"});
    const auto early = submit({"--delay", "1500ms"});
    const auto middle = submit({"--at", std::to_string(zkd::protocol::now_ms() + 2200)});
    const auto st = zkd({"status", late});
    EXPECT_EQ(st.exit_code, 0) << st.err;
    EXPECT_NE(st.out.find(late + " delayed until "), std::string::npos) << st.out;
    const auto as_json = zkd({"status", late, "--json"});
    EXPECT_NE(as_json.out.find("\"state\":\"delayed\""), std::string::npos) << as_json.out;
    EXPECT_NE(as_json.out.find("\"due_ms\":" + std::to_string(due_of(late))), std::string::npos)
        << as_json.out;
    // zkd tasks lists delayed tasks, with their try and due time (soonest due first): one
    // due in a minute (cancelled after) is surely still there.
    const auto later = submit({"--delay", "60s"});
    const auto listed = zkd({"tasks", "--json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    const auto list = json::parse(listed.out);
    bool seen = false;
    std::int64_t last_due = 0;
    for (const auto& t : list.at("delayed").as_array()) {
        EXPECT_EQ(t.at("state"), "delayed") << listed.out;
        const auto due = t.at("due_ms").to_number<std::int64_t>();
        EXPECT_GE(due, last_due) << listed.out;
        last_due = due;
        if (t.at("id").as_string() == later) {
            seen = true;
            EXPECT_EQ(due, due_of(later));
            EXPECT_EQ(t.at("try"), 1);
        }
    }
    EXPECT_TRUE(seen) << listed.out;
    EXPECT_GE(list.at("delayed_total").to_number<std::int64_t>(), 1) << listed.out;
    const auto table = zkd({"tasks"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    const auto row = table.out.find(later + " ");
    ASSERT_NE(row, std::string::npos) << table.out;
    const auto line = table.out.substr(row, table.out.find('\n', row) - row);
    EXPECT_NE(line.find("delayed"), std::string::npos) << line;
    EXPECT_NE(line.find("try 1, due "), std::string::npos) << line;
    EXPECT_NE(table.out.find(" delayed\n"), std::string::npos) << table.out;  // the totals
    EXPECT_EQ(zkd({"cancel", later}).exit_code, 0);

    std::vector<std::pair<std::int64_t, std::string>> started;
    for (const auto& id : {late, early, middle}) {
        const auto r = wait(id);
        ASSERT_TRUE(r.is_object()) << id;
        EXPECT_EQ(r.at("state"), "succeeded") << json::serialize(r);
        const auto s = r.at("started_ms").to_number<std::int64_t>();
        // Never before its time (the id carries the due time; one machine, one clock).
        EXPECT_GE(s, due_of(id)) << id << " started " << due_of(id) - s << " ms early";
        started.emplace_back(s, id);
    }
    // In the order of due times. The dues are as the ids say: each zkd submit reads the clock
    // itself, and `middle`'s time is read after two submits, so on a busy machine it may be due
    // after `late`. Dues closer than 100 ms may start either way round, and two tasks released
    // together (the master held up past both) a few ms apart.
    for (const auto& [s1, a] : started) {
        for (const auto& [s2, b] : started) {
            if (due_of(a) + 100 <= due_of(b)) {
                EXPECT_LE(s1, s2 + 20) << a << " is due " << due_of(b) - due_of(a) << " ms before "
                                       << b << " but started " << s1 - s2 << " ms after it";
            }
        }
    }
}

TEST_F(Delayed, ACancelEndsADelayedTask) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("n1", {"--capacity", "2"});
    wait_up(1);
    const auto id = submit({"--delay", "60s"});
    const auto c = zkd({"cancel", id, "--wait", "--timeout", "30s"});
    EXPECT_NE(c.out.find("\"cancelled\""), std::string::npos) << c.out << c.err;
    const auto st = zkd({"status", id});
    EXPECT_EQ(st.exit_code, 5) << st.out;  // consumed by the wait: gone
}

TEST_F(Delayed, AMasterKilledWhileAThousandWaitLosesNoneAndStartsNoneEarly) {
    ZKD_REQUIRE_ZK_SERVER();
    // Two master candidates that run nothing, one worker.
    auto& first = start_node("m1", {"--capacity", "0"});
    wait_up(0);  // m1 leads (capacity 0: no worker)
    start_node("m2", {"--capacity", "0"});
    start_node("w1", {"--role", "worker", "--capacity", "64"});
    wait_up(1);
    std::vector<std::string> ids;
    std::int64_t due = 0;
    run([&]() -> asio::awaitable<void> {
        auto cfg = make_config();
        cfg.connect_string = connect() + zkd::protocol::chroot_path(ns_);
        zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
        EXPECT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
        auto l = co_await zkd::roles::read_layout(zk);
        EXPECT_TRUE(l);
        if (l) {
            zkd::roles::task_client tc(zk, *l);
            std::vector<zkd::protocol::task_spec> many(1000);
            for (std::size_t i = 0; i < many.size(); ++i) {
                many[i].type = "echo";
                many[i].args = static_cast<std::int64_t>(i);
            }
            zkd::roles::submit_options when;
            due = zkd::protocol::now_ms() + 6000;
            when.due_ms = due;
            auto got = co_await tc.submit(std::move(many), when);
            EXPECT_TRUE(got) << got.error().message();
            if (got) {
                ids = std::move(*got);
            }
            co_await tc.flush();
        }
        co_await zk.close();
    }());
    ASSERT_EQ(ids.size(), 1000U);
    std::this_thread::sleep_for(1500ms);  // the first master has them all in view
    first.kill(SIGKILL);                  // the next takes over with none of its memory
    std::size_t succeeded = 0;
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
    run([&]() -> asio::awaitable<void> {
        auto cfg = make_config();
        cfg.connect_string = connect() + zkd::protocol::chroot_path(ns_);
        zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
        EXPECT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
        auto l = co_await zkd::roles::read_layout(zk);
        if (l) {
            zkd::roles::task_client tc(zk, *l);
            for (const auto& id : ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                EXPECT_TRUE(r) << id;
                if (r && r->state == zkd::protocol::task_state::succeeded) {
                    ++succeeded;
                    earliest = std::min(earliest, r->started_ms);
                }
            }
            co_await tc.flush();
        }
        co_await zk.close();
    }());
    EXPECT_EQ(succeeded, 1000U);  // none lost
    EXPECT_GE(earliest, due) << "a task started " << due - earliest << " ms early";
}

TEST_F(Delayed, AProgramFailingTwiceSucceedsAtItsThirdTryWithTheErrorsKept) {
    ZKD_REQUIRE_ZK_SERVER();
    const auto counter = dir_ / "tries";
    const auto started = dir_ / "started";
    const auto go = dir_ / "go";
    const auto script = dir_ / "flaky.sh";
    {
        // The first try says it started and fails only once the test lets it (below).
        std::ofstream s(script);
        s << "#!/bin/sh\n"
          << "n=$(cat '" << counter.string() << "' 2>/dev/null || echo 0)\n"
          << "n=$((n+1))\necho $n > '" << counter.string() << "'\n"
          << "if [ $n -eq 1 ]; then\n"
          << "  : > '" << started.string() << "'\n"
          << "  i=0; while [ ! -e '" << go.string() << "' ] && [ $i -lt 600 ]; do\n"
          << "    sleep 0.05; i=$((i+1)); done\n"
          << "fi\n"
          << "if [ $n -lt 3 ]; then echo \"failure $n\" >&2; exit 1; fi\n"
          << "echo '{\"ok\":true}'\n";
    }
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    // The master (which releases a retry when it is due) and the worker are separate nodes,
    // so that the test can hold the master still while a retry waits: a retry's wait is full
    // jitter, often shorter than a `zkd status` takes.
    auto& master = start_node("n0", {"--role", "standby"}, /*short_session=*/false);
    wait_up(0);
    start_node("n1", {"--role", "worker", "--exec", "flaky=" + script.string()});
    wait_up(1);
    const auto id = submit({"--retries", "3", "--backoff", "400ms:10s"}, "flaky");
    for (int i = 0; i < 600 && !std::filesystem::exists(started); ++i) {
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(std::filesystem::exists(started)) << "the first try never started";
    // With the master stopped, the retry the worker writes when the first try fails stays
    // delayed; status says which try comes and the last error. The first status normally
    // sees it; should a slow machine need longer than the master's session (zkd's default
    // timeout, the test server's 4 s at most), the master only takes over again after it.
    master.kill(SIGSTOP);
    std::ofstream{go};
    bool seen_retry = false;
    std::string last_status;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!seen_retry && std::chrono::steady_clock::now() < until) {
        const auto st = zkd({"status", id});
        last_status = st.out + st.err;
        seen_retry = st.out.find(" delayed until ") != std::string::npos &&
                     st.out.find("(try 2)") != std::string::npos &&
                     st.out.find("last error: ") != std::string::npos;
        if (!seen_retry) {
            std::this_thread::sleep_for(20ms);
        }
    }
    master.kill(SIGCONT);
    const auto r = wait(id);
    ASSERT_TRUE(r.is_object());
    EXPECT_EQ(r.at("state"), "succeeded") << json::serialize(r);
    ASSERT_TRUE(r.as_object().contains("try")) << json::serialize(r);
    EXPECT_EQ(r.at("try"), 3) << json::serialize(r);
    ASSERT_TRUE(r.at("errors").is_array()) << json::serialize(r);
    const auto& errors = r.at("errors").as_array();
    ASSERT_EQ(errors.size(), 2U) << json::serialize(r);
    EXPECT_EQ(errors[0].at("try"), 1);
    EXPECT_EQ(errors[1].at("try"), 2);
    EXPECT_EQ(errors[0].at("code"), "handler_error");
    // Each retry waited no less than nothing and no more than its cap (400 ms, then 800 ms),
    // from the failed try's end to the next start.
    const auto end1 = errors[0].at("finished_ms").to_number<std::int64_t>();
    const auto end2 = errors[1].at("finished_ms").to_number<std::int64_t>();
    EXPECT_GE(end2, end1);
    EXPECT_GE(r.at("started_ms").to_number<std::int64_t>(), end2);
    EXPECT_TRUE(seen_retry) << "zkd status never showed the retry waiting; last: " << last_status;
}

}  // namespace ZKD_UNITY_ID
