// SPDX-License-Identifier: MIT
// Exec types with real processes: programs run by the exec handler alone (ExecProgram), by
// a worker of an in-process cluster on a real ZooKeeper (ExecCluster), and by real `zkd run`
// processes (ExecZkd). The programs are small shell scripts each test writes. Over 700
// lines: the three fixtures share the script helpers.
#include "handlers/exec.hpp"

#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/roles_cluster.hpp"
#include "support/zkd_cluster.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <signal.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::handlers;
using namespace zkd::protocol;
using zkd::test::alive;
using zkd::test::any_alive;
using zkd::test::pids_in;
using zkd::test::read_file;

namespace {

std::string test_name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

/// Writes an executable `#!/bin/sh` script `name` into `dir`; its path.
std::string write_script(const fs::path& dir, const std::string& name, const std::string& body) {
    const auto path = dir / name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
}

/// The pid a script wrote into `file`, or 0.
pid_t pid_in(const fs::path& file) {
    std::istringstream in(read_file(file));
    pid_t pid = 0;
    in >> pid;
    return pid;
}

bool process_exists(pid_t pid) {
    return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

std::size_t open_fds() {
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{})
    );
}

/// This process's children (running, or zombies nobody reaped), from every thread's list.
std::set<pid_t> children() {
    std::set<pid_t> out;
    for (const auto& task : fs::directory_iterator("/proc/self/task")) {
        std::istringstream in(read_file(task.path() / "children"));
        for (pid_t pid = 0; in >> pid;) {
            out.insert(pid);
        }
    }
    return out;
}

/// A script that starts a tree: a background child, a child in a session of its own
/// (setsid), one that ignores SIGTERM, then itself sleeps; each writes its pid into `pids`,
/// one a line (four lines in all once the tree is up).
std::string tree_script(const fs::path& dir, const fs::path& pids) {
    const std::string out = " >> " + pids.string();
    return write_script(
        dir, "tree.sh",
        "sh -c 'echo $$" + out +
            "; exec sleep 300' &\n"
            "setsid sh -c 'echo $$" +
            out +
            "; exec sleep 300' &\n"
            "sh -c 'trap \"\" TERM; echo $$" +
            out +
            "; exec sleep 300' &\n"
            "echo $$" +
            out + "\nexec sleep 300"
    );
}

exec::program make_program(
    const std::string& name,
    std::vector<std::string> argv,
    exec::output_mode mode = exec::output_mode::json
) {
    exec::program_config c;
    c.name = name;
    c.argv = std::move(argv);
    c.output = mode;
    c.kill_grace = 300ms;
    return exec::resolve(c, [](const std::string& n) -> std::optional<std::string> {
        const char* v = std::getenv(n.c_str());  // NOLINT(concurrency-mt-unsafe)
        return v == nullptr ? std::nullopt : std::optional<std::string>(v);
    });
}

// --- the handler alone -----------------------------------------------------------------------

class ExecProgram : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = zkd::test::make_test_dir("exec", test_name());
        children_before_ = children();  // a ZooKeeper server of another suite may be one
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string script(const std::string& name, const std::string& body) {
        return write_script(dir_, name, body);
    }

    /// Registers `p` (once) and runs one task of it; `stop_when`, if given, is polled every
    /// 10 ms while it runs and requests stop once it is true.
    handler_result call(
        exec::program p, json::value args, const std::function<bool()>& stop_when = {}
    ) {
        const std::string type = p.config.name;
        if (reg_.find_async(type) == nullptr) {
            exec::add_exec_type(reg_, std::move(p));
        }
        std::stop_source stop;
        std::optional<handler_result> got;
        async_call c;
        c.args = std::move(args);
        c.task = "t-1";
        c.attempt = 2;
        c.epoch = 9;
        c.stop = stop.get_token();
        c.started = [] {};
        c.progress = [this](double f, std::string m) { progress_.emplace_back(f, std::move(m)); };
        asio::co_spawn(
            ioc_, run_async_handler(reg_, type, std::move(c)),
            [&](const std::exception_ptr&, handler_result r) { got = std::move(r); }
        );
        asio::steady_timer poll(ioc_);
        std::function<void()> watch = [&] {
            poll.expires_after(10ms);
            poll.async_wait([&](boost::system::error_code ec) {
                if (ec || got) {
                    return;
                }
                if (stop_when()) {
                    stop.request_stop();
                    return;
                }
                watch();
            });
        };
        if (stop_when) {
            watch();
        }
        zkd::test::run_until(
            ioc_, [&] { return got.has_value(); }, 30s
        );
        poll.cancel();
        ioc_.run_for(10ms);  // let the poll timer's handler go
        return *got;
    }

    fs::path dir_;
    asio::io_context ioc_;
    registry reg_;
    std::vector<std::pair<double, std::string>> progress_;
    std::set<pid_t> children_before_;
};

TEST_F(ExecProgram, ExitZeroSucceedsAndNonZeroFailsWithTheCodeAndStderr) {
    auto ok =
        call(make_program("ok", {script("ok.sh", "cat >/dev/null; echo '{\"ok\": true}'")}), 1);
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(*ok, json::parse(R"({"ok":true})"));

    auto bad = call(
        make_program(
            "bad", {script("bad.sh", "echo 'first line' >&2; echo 'bad input' >&2; exit 3")}
        ),
        1
    );
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, "handler_error");
    EXPECT_EQ(bad.error().message, "the program exited with code 3; stderr: first line\nbad input");
}

TEST_F(ExecProgram, NiceLowersTheProgramsPriorityAndItsChildrens) {
    const auto s = script("nice.sh", "cat >/dev/null; nice; sh -c nice");
    const int own = ::getpriority(PRIO_PROCESS, 0);
    auto plain = call(make_program("plain", {s}, exec::output_mode::text), 1);
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ(*plain, json::value(std::to_string(own) + "\n" + std::to_string(own) + "\n"));

    auto p = make_program("niced", {s}, exec::output_mode::text);
    p.config.nice = 7;
    const auto want = std::to_string(std::min(own + 7, 19));
    auto niced = call(std::move(p), 1);
    ASSERT_TRUE(niced) << niced.error().message;
    EXPECT_EQ(*niced, json::value(want + "\n" + want + "\n"));
}

TEST_F(ExecProgram, KilledBySignalNamesTheSignal) {
    auto r = call(make_program("segv", {script("segv.sh", "kill -SEGV $$")}), 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "the program was killed by signal 11 (SIGSEGV)");
}

TEST_F(ExecProgram, NonJsonOutputFailsAJsonTypeAndIsTheValueOfATextType) {
    const auto s = script("hello.sh", "echo hello");
    auto j = call(make_program("j", {s}), 1);
    ASSERT_FALSE(j);
    EXPECT_NE(j.error().message.find("not JSON"), std::string::npos) << j.error().message;
    EXPECT_NE(j.error().message.find("hello"), std::string::npos) << j.error().message;
    auto t = call(make_program("t", {s}, exec::output_mode::text), 1);
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(*t, json::value("hello\n"));
}

TEST_F(ExecProgram, StdinAndStdoutBiggerThanAPipeBufferFlowBothWaysAtOnce) {
    // `cat` writes while we still write: both must move concurrently or both block.
    const std::string big(400 * 1024, 'x');
    auto cat = make_program("cat", {"/bin/cat"});
    cat.config.max_output = exec::max_max_output;
    auto echoed = call(std::move(cat), json::value(big));
    ASSERT_TRUE(echoed) << echoed.error().message;
    EXPECT_EQ(*echoed, json::value(big));

    const std::string huge(1024 * 1024, 'y');  // 1 MiB of args in, a count out
    auto counted = call(make_program("wc", {"/usr/bin/wc", "-c"}), json::value(huge));
    ASSERT_TRUE(counted) << counted.error().message;
    EXPECT_EQ(*counted, json::value(huge.size() + 2));  // the JSON string's quotes
}

TEST_F(ExecProgram, OutputOverTheLimitFailsAndKillsTheProgram) {
    auto p = make_program(
        "yes", {script("yes.sh", "echo $$ > " + (dir_ / "pid").string() + "; exec yes")},
        exec::output_mode::text
    );
    p.config.max_output = 64 * 1024;
    auto r = call(std::move(p), 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "output_too_large");
    EXPECT_FALSE(process_exists(pid_in(dir_ / "pid")));
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, StopSendsSigtermToTheGroupAndTheProgramIsReaped) {
    const auto pidfile = dir_ / "pid";
    auto p = make_program(
        "sleepy", {script("sleepy.sh", "echo $$ > " + pidfile.string() + "; exec sleep 30")}
    );
    auto r = call(std::move(p), 1, [&] { return pid_in(pidfile) > 0; });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "cancelled");
    EXPECT_NE(r.error().message.find("SIGTERM"), std::string::npos) << r.error().message;
    EXPECT_FALSE(process_exists(pid_in(pidfile)));
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, StopKillsTheWholeTreeSetsidAndSigtermIgnoringProcessesIncluded) {
    const auto pids = dir_ / "pids";
    auto p = make_program("tree", {tree_script(dir_, pids)});
    auto r = call(std::move(p), 1, [&] { return pids_in(pids).size() == 4; });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "cancelled");
    const auto all = pids_in(pids);
    ASSERT_EQ(all.size(), 4U);
    EXPECT_FALSE(any_alive(all)) << read_file(pids);
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, WhatAProgramLeavesRunningDiesWhenItExits) {
    const auto pids = dir_ / "pids";
    const auto script = write_script(
        dir_, "leaver.sh",
        "setsid sh -c 'echo $$ >> " + pids.string() +
            "; exec sleep 300' &\n"
            "while [ ! -s " +
            pids.string() + " ]; do sleep 0.01; done; echo 7"
    );
    auto r = call(make_program("leaver", {script}), 1);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, json::value(7));
    const auto all = pids_in(pids);
    ASSERT_EQ(all.size(), 1U);
    EXPECT_FALSE(any_alive(all));
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, AProgramIgnoringSigtermGetsSigkillAfterTheGrace) {
    const auto started = dir_ / "started";
    // Its trap reports the SIGTERM and carries on; only SIGKILL ends it.
    auto p = make_program(
        "stubborn", {script(
                        "stubborn.sh", "trap 'echo got-term >&2' TERM; touch " + started.string() +
                                           "; while :; do sleep 0.05; done"
                    )}
    );
    auto r = call(std::move(p), 1, [&] { return fs::exists(started); });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "cancelled");
    EXPECT_NE(r.error().message.find("SIGKILL"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("got-term"), std::string::npos) << r.error().message;
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, TheEnvironmentHoldsOnlyWhatIsListed) {
    ::setenv("ZKD_EXEC_TEST_SECRET", "leak", 1);  // NOLINT(concurrency-mt-unsafe)
    ::setenv("ZKD_EXEC_TEST_KEEP", "kept", 1);    // NOLINT(concurrency-mt-unsafe)
    exec::program_config c;
    c.name = "env";
    c.argv = {"/usr/bin/env"};
    c.output = exec::output_mode::text;
    c.env = {"ZKD_EXEC_TEST_KEEP", "MODE=fast"};
    auto p = exec::resolve(c, [](const std::string& n) -> std::optional<std::string> {
        const char* v = std::getenv(n.c_str());  // NOLINT(concurrency-mt-unsafe)
        return v == nullptr ? std::nullopt : std::optional<std::string>(v);
    });
    auto r = call(std::move(p), 1);
    ::unsetenv("ZKD_EXEC_TEST_SECRET");  // NOLINT(concurrency-mt-unsafe)
    ::unsetenv("ZKD_EXEC_TEST_KEEP");    // NOLINT(concurrency-mt-unsafe)
    ASSERT_TRUE(r) << r.error().message;
    std::set<std::string> lines;
    std::istringstream in(std::string(r->as_string()));
    for (std::string line; std::getline(in, line);) {
        lines.insert(line);
    }
    EXPECT_EQ(
        lines, (std::set<std::string>{
                   "ZKD_EXEC_TEST_KEEP=kept", "MODE=fast", "ZKD_TASK_ID=t-1", "ZKD_TASK_TYPE=env",
                   "ZKD_TASK_ATTEMPT=2", "ZKD_TASK_EPOCH=9", "ZKD_PROGRESS_FD=3"})
    );
}

TEST_F(ExecProgram, ArgsWithShellMetacharactersAndUnicodeArriveVerbatim) {
    const auto args = json::parse(
        R"({"s":"'; rm -rf / $(id) `id` \"q\" \\ | & > < * ~ $HOME\n\t","u":"ünïcødé 日本 😀","n":[1,2.5,null,true]})"
    );
    const auto in_file = dir_ / "stdin";
    auto r = call(
        make_program(
            "raw", {script("raw.sh", "cat > " + in_file.string() + "; cat " + in_file.string())}
        ),
        args
    );
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, args);
    // Exactly the task's JSON, numbers with a fraction written plainly (2.5, not 2.5E0).
    EXPECT_EQ(read_file(in_file), zkd::protocol::to_text(args));
    EXPECT_NE(read_file(in_file).find("[1,2.5,null,true]"), std::string::npos);

    // The operator's argv is not a shell command line either.
    auto lit = call(
        make_program(
            "lit", {script("lit.sh", "printf '%s|%s' \"$1\" \"$2\""), "$HOME", "a;b"},
            exec::output_mode::text
        ),
        1
    );
    ASSERT_TRUE(lit) << lit.error().message;
    EXPECT_EQ(*lit, json::value("$HOME|a;b"));
}

TEST_F(ExecProgram, InheritedDescriptorsAreClosedInTheProgram) {
    const int leak = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
    ASSERT_GE(leak, 0);
    ASSERT_EQ(::dup2(leak, 50), 50);
    auto r = call(
        make_program(
            "fds", {script(
                       "fds.sh",
                       "if [ -e /proc/self/fd/50 ]; then echo '\"open\"'; "
                       "else echo '\"closed\"'; fi"
                   )}
        ),
        1
    );
    ::close(50);
    ::close(leak);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, json::value("closed"));
}

TEST_F(ExecProgram, ProgressLinesOnFd3ReachTheCallback) {
    auto r = call(
        make_program(
            "steps", {script(
                         "steps.sh",
                         "echo '{\"progress\":0.25,\"message\":\"a\"}' >&3; "
                         "echo 'not progress' >&3; "
                         "echo '{\"progress\":1,\"message\":\"done\"}' >&3; "
                         "echo 7"
                     )}
        ),
        1
    );
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(progress_, (std::vector<std::pair<double, std::string>>{{0.25, "a"}, {1.0, "done"}}));
}

TEST_F(ExecProgram, AFailureToStartIsAFailedTaskNotACrash) {
    const auto gone = dir_ / "gone";
    fs::create_directories(gone);
    exec::program_config c;
    c.name = "nodir";
    c.argv = {"/bin/cat"};
    c.dir = gone.string();
    auto p = exec::resolve(c, [](const std::string&) { return std::nullopt; });
    fs::remove(gone);  // after the start-up check
    auto r = call(std::move(p), 1);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("cannot start the program: chdir"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, ConcurrencyIsLimitedPerType) {
    const auto lock = dir_ / "lock";
    auto p = make_program(
        "one", {script(
                   "one.sh", "mkdir " + lock.string() + " || exit 9; sleep 0.05; rmdir " +
                                 lock.string() + "; echo 1"
               )}
    );
    p.config.concurrency = 1;
    exec::add_exec_type(reg_, std::move(p));
    std::vector<handler_result> got;
    for (int i = 0; i < 4; ++i) {
        async_call c;
        c.args = i;
        c.started = [] {};
        c.progress = [](double, const std::string&) {};
        asio::co_spawn(
            ioc_, run_async_handler(reg_, "one", std::move(c)),
            [&](const std::exception_ptr&, handler_result r) { got.push_back(std::move(r)); }
        );
    }
    zkd::test::run_until(
        ioc_, [&] { return got.size() == 4; }, 30s
    );
    for (const auto& r : got) {
        EXPECT_TRUE(r) << r.error().message;  // exit 9: two ran at once
    }
}

TEST_F(ExecProgram, TwoHundredShortProgramsLeakNoDescriptorsAndNoChildren) {
    auto p = make_program("quick", {script("quick.sh", "echo 1")});
    p.config.concurrency = 8;
    exec::add_exec_type(reg_, std::move(p));
    // One first: the io_context opens its reactor's descriptors (epoll and co) on first use.
    ASSERT_TRUE(call(make_program("warm-up", {script("warm.sh", "echo 0")}), 0));
    ASSERT_EQ(children(), children_before_);
    const std::size_t fds_before = open_fds();
    std::size_t ok = 0;
    std::size_t done = 0;
    for (int i = 0; i < 200; ++i) {
        async_call c;
        c.args = i;
        c.started = [] {};
        c.progress = [](double, const std::string&) {};
        asio::co_spawn(
            ioc_, run_async_handler(reg_, "quick", std::move(c)),
            [&](const std::exception_ptr&, handler_result r) {
                ok += r ? 1 : 0;
                ++done;
            }
        );
    }
    zkd::test::run_until(
        ioc_, [&] { return done == 200; }, 60s
    );
    EXPECT_EQ(ok, 200U);
    EXPECT_EQ(open_fds(), fds_before);
    EXPECT_EQ(children(), children_before_);
}

TEST_F(ExecProgram, TheExamplesOfDocsExecMdRun) {
    const fs::path examples = fs::path(ZKD_SOURCE_DIR) / "examples" / "exec";
    const auto readme = (fs::path(ZKD_SOURCE_DIR) / "README.md").string();
    auto words = call(
        make_program("wordcount", {(examples / "wordcount.py").string()}),
        json::value{{"files", json::array{readme}}}
    );
    ASSERT_TRUE(words) << words.error().message;
    EXPECT_GT(words->at("total").as_int64(), 100);
    ASSERT_FALSE(progress_.empty());
    EXPECT_DOUBLE_EQ(progress_.back().first, 1.0);
    auto sum = call(
        make_program("checksum", {(examples / "checksum.sh").string()}),
        json::value{{"file", readme}, {"offset", 0}, {"length", 10}}
    );
    ASSERT_TRUE(sum) << sum.error().message;
    EXPECT_EQ(sum->at("sha256").as_string().size(), 64U);
    auto bad = call(make_program("wordcount", {(examples / "wordcount.py").string()}), 5);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("exited with code 2"), std::string::npos)
        << bad.error().message;
}

// --- through a worker of an in-process cluster -----------------------------------------------

/// A task as a stranger would write it under an assignment directory.
std::string foreign_task_data(const std::string& type, json::value args) {
    task_spec t;
    t.type = type;
    t.args = std::move(args);
    t.submitted_ms = now_ms();
    return encode(t);
}

class ExecCluster : public zkd::test::roles_cluster {
protected:
    void SetUp() override {
        roles_cluster::SetUp();
        dir_ = zkd::test::make_test_dir("exec-cluster", test_name());
        auto cat = make_program("cat", {"/bin/cat"});
        cat.config.max_output = exec::max_max_output;
        exec::add_exec_type(registry_, std::move(cat));
        exec::add_exec_type(
            registry_, make_program("bad", {write_script(dir_, "bad.sh", "echo nope >&2; exit 3")})
        );
        // Writes its pid where the test finds it by task id, then sleeps.
        exec::add_exec_type(
            registry_,
            make_program(
                "slow", {write_script(
                            dir_, "slow.sh",
                            "echo $$ > " + dir_.string() + "/pid-$ZKD_TASK_ID; exec sleep 30"
                        )}
            )
        );
        exec::add_exec_type(
            registry_, make_program("quick", {write_script(dir_, "quick.sh", "echo 1")})
        );
    }
    void TearDown() override {
        roles_cluster::TearDown();
        fs::remove_all(dir_);
    }

    pid_t pid_of(const std::string& tid) const { return pid_in(dir_ / ("pid-" + tid)); }

    fs::path dir_;
};

TEST_F(ExecCluster, ProgramsSucceedFailTimeOutAndAreCancelledThroughAWorker) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 4);
            task_client tc(*zk, layout_);
            const json::value args = json::parse(R"({"x":[1,"two"]})");
            std::vector<task_spec> reqs{{"cat", args}, {"bad", 1}, {"slow", 1}, {"slow", 2}};
            reqs[2].timeout = 300ms;
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            const std::string to_cancel = (*ids)[3];
            ZKD_AWAIT_CONDITION(pid_of(to_cancel) > 0, 20s);
            ASSERT_TRUE(alive(pid_of(to_cancel)));
            const auto cancelled = co_await tc.cancel(to_cancel);
            ASSERT_TRUE(cancelled);

            auto ok = co_await zkd::zkco::with_timeout(tc.wait((*ids)[0]), 30s);
            ASSERT_TRUE(ok) << ok.error().message();
            EXPECT_EQ(ok->state, task_state::succeeded);
            EXPECT_EQ(ok->value, args);
            auto bad = co_await zkd::zkco::with_timeout(tc.wait((*ids)[1]), 30s);
            ASSERT_TRUE(bad);
            EXPECT_EQ(bad->state, task_state::failed);
            EXPECT_EQ(bad->error->message, "the program exited with code 3; stderr: nope");
            auto late = co_await zkd::zkco::with_timeout(tc.wait((*ids)[2]), 30s);
            ASSERT_TRUE(late);
            EXPECT_EQ(late->state, task_state::timed_out);
            EXPECT_EQ(late->error->message, "timed out after 300 ms");
            EXPECT_FALSE(alive(pid_of((*ids)[2])));
            auto gone = co_await zkd::zkco::with_timeout(tc.wait(to_cancel), 30s);
            ASSERT_TRUE(gone);
            EXPECT_EQ(gone->state, task_state::cancelled);
            EXPECT_FALSE(alive(pid_of(to_cancel)));

            // A bundle of exec tasks: one program per task, one result.
            std::vector<task_spec> bundled{{"cat", 1}, {"cat", 2}, {"bad", 3}, {"cat", 4}};
            submit_options so;
            so.bundle = 4;
            auto bids = co_await tc.submit(std::move(bundled), so);
            ASSERT_TRUE(bids);
            for (std::size_t i = 0; i < bids->size(); ++i) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait((*bids)[i]), 30s);
                ASSERT_TRUE(r) << r.error().message();
                if (i == 2) {
                    EXPECT_EQ(r->state, task_state::failed);
                } else {
                    EXPECT_EQ(r->state, task_state::succeeded);
                    EXPECT_EQ(r->value, json::value(i + 1));
                }
            }
            co_await tc.flush();
        }(),
        120s
    );
}

TEST_F(ExecCluster, AProgramGetsItsTasksIdAttemptAndEpochAndNeverAForgedName) {
    const auto seen = dir_ / "seen";
    exec::add_exec_type(
        registry_, make_program(
                       "fence", {write_script(
                                    dir_, "fence.sh",
                                    "echo \"$ZKD_TASK_ID\" >> " + seen.string() +
                                        "; printf '{\"id\":\"%s\",\"attempt\":%s,\"epoch\":%s}' "
                                        "\"$ZKD_TASK_ID\" \"$ZKD_TASK_ATTEMPT\" \"$ZKD_TASK_EPOCH\""
                                )}
                   )
    );
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            auto w = co_await start_worker("w1", 2);
            co_await workers_joined(*zk, 1);
            task_client tc(*zk, layout_);
            tc.place_directly(false);  // placed by the master: the assignment has an epoch
            std::vector<task_spec> reqs{{"fence", 1}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            ASSERT_EQ(r->state, task_state::succeeded) << r->error->message;
            EXPECT_EQ(r->value.at("id"), json::value(ids->front()));
            EXPECT_EQ(r->value.at("attempt"), json::value(1));
            EXPECT_GE(r->value.at("epoch").as_int64(), 1);
            // A bundled task's id is the one clients know it by.
            std::vector<task_spec> two{{"fence", 1}, {"fence", 2}};
            submit_options sb;
            sb.bundle = 2;
            auto bids = co_await tc.submit(std::move(two), sb);
            ASSERT_TRUE(bids);
            auto b1 = co_await zkd::zkco::with_timeout(tc.wait((*bids)[1]), 30s);
            ASSERT_TRUE(b1) << b1.error().message();
            EXPECT_EQ(b1->value.at("id"), json::value((*bids)[1]));

            // A stranger's assignment named like a shell command fails as malformed_task and
            // no program runs for it.
            const std::string name = "x;$(id)";
            ASSERT_TRUE(co_await zk->create(
                layout::assignment(w.me.id, name), foreign_task_data("fence", json::value(7))
            ));
            // An unlogged child: the worker lists its directory on its next change.
            std::vector<task_spec> more{{"fence", 3}};
            auto nudge = co_await tc.submit(std::move(more));
            ASSERT_TRUE(nudge);
            auto n = co_await zkd::zkco::with_timeout(tc.wait(nudge->front()), 30s);
            ASSERT_TRUE(n) << n.error().message();
            std::optional<task_result> failed;
            for (int i = 0; i < 300 && !failed; ++i) {
                auto got = co_await zk->get(layout_.result(name));
                if (got) {
                    failed = decode_result(got->data).value();
                } else {
                    co_await settle(20ms);
                }
            }
            ASSERT_TRUE(failed) << "no result for the forged assignment";
            EXPECT_EQ(failed->state, task_state::failed);
            EXPECT_EQ(failed->error->code, codes::malformed_task);
            EXPECT_EQ(read_file(seen).find(name), std::string::npos) << read_file(seen);
            EXPECT_EQ(read_file(seen).find("x;"), std::string::npos) << read_file(seen);
            co_await tc.flush();
        }(),
        120s
    );
}

TEST_F(ExecCluster, ProgressIsPublishedOnTheAssignmentAtMostOnceASecond) {
    const auto go = dir_ / "go";
    // 200 reports at once, a last one after the running mark (so it waits for the throttle);
    // then it waits to be told to finish.
    exec::add_exec_type(
        registry_,
        make_program(
            "steps",
            {write_script(
                dir_, "steps.sh",
                "i=0; while [ $i -lt 200 ]; do echo \"{\\\"progress\\\":0.5,\\\"message\\\":\\\"n "
                "$i\\\"}\" >&3; i=$((i+1)); done\n"
                "sleep 0.3; echo '{\"progress\":0.75,\"message\":\"last\"}' >&3\n"
                "while [ ! -e " +
                    go.string() + " ]; do sleep 0.02; done; echo 1"
            )}
        )
    );
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            auto w = co_await start_worker("w1", 2);
            task_client tc(*zk, layout_);
            std::vector<task_spec> reqs{{"steps", 1}};
            const auto started = std::chrono::steady_clock::now();
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            const std::string tid = ids->front();
            task_info info;
            for (int i = 0; i < 500 && info.progress_message != "last"; ++i) {
                co_await settle(20ms);
                auto got = co_await read_task(*zk, layout_, tid);
                ASSERT_TRUE(got);
                info = *got;
            }
            EXPECT_EQ(info.state, task_state::running);
            EXPECT_DOUBLE_EQ(info.progress, 0.75);
            EXPECT_EQ(info.progress_message, "last");
            EXPECT_EQ(to_json(info).at("progress").at("fraction").as_double(), 0.75);
            auto listed = co_await list_tasks(*zk, layout_, 10);
            ASSERT_TRUE(listed);
            ASSERT_EQ(listed->assigned.size(), 1U);
            EXPECT_EQ(listed->assigned.front().progress_message, "last");
            // The running mark and then at most one progress write a second (the node's version
            // counts the writes).
            auto node = co_await zk->get(layout::assignment(w.me.id, tid));
            ASSERT_TRUE(node);
            const auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::steady_clock::now() - started
            )
                                  .count();
            EXPECT_LE(node->stat.version, 2 + secs) << "writes in " << secs << " s";
            std::ofstream(go) << "";
            auto r = co_await zkd::zkco::with_timeout(tc.wait(tid), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            co_await tc.flush();
        }(),
        120s
    );
}

TEST_F(ExecCluster, ABuiltInHandlersProgressIsPublishedToo) {
    // A synchronous (compute-pool) handler that reports, then waits to be stopped or released.
    auto release = std::make_shared<std::atomic<bool>>(false);
    registry_.add(
        "reporting",
        [release](
            const json::value&, std::stop_token stop, const progress_fn& progress
        ) -> handler_result {
            for (int i = 0; i <= 1000; ++i) {
                progress(i / 1000.0 * 0.6, "step " + std::to_string(i));
            }
            while (!release->load() && !stop.stop_requested()) {
                std::this_thread::sleep_for(5ms);
            }
            return json::value("released");
        }
    );
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            std::vector<task_spec> reqs{{"reporting", 1}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            task_info info;
            for (int i = 0; i < 500 && info.progress_message != "step 1000"; ++i) {
                co_await settle(20ms);
                auto got = co_await read_task(*zk, layout_, ids->front());
                ASSERT_TRUE(got);
                info = *got;
            }
            EXPECT_DOUBLE_EQ(info.progress, 0.6);
            EXPECT_EQ(info.progress_message, "step 1000");
            release->store(true);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->value, json::value("released"));
            co_await tc.flush();
        }(),
        120s
    );
}

TEST_F(ExecCluster, ArgsAndOutputBiggerThanAPipeBufferThroughZooKeeper) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            const json::value big(std::string(300 * 1024, 'z'));
            std::vector<task_spec> reqs{{"cat", big}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->value, big);
            co_await tc.flush();
        }(),
        120s
    );
}

TEST_F(ExecCluster, TwoHundredShortProgramsThroughOneWorkerLeakNoDescriptorsOrChildren) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await cluster_session();
            co_await start_master();
            co_await start_worker("w1", 16);
            task_client tc(*zk, layout_);
            std::vector<task_spec> first{{"quick", 0}};
            auto warm = co_await tc.submit(std::move(first));  // sockets and reactors open now
            ASSERT_TRUE(warm);
            const auto warmed = co_await zkd::zkco::with_timeout(tc.wait(warm->front()), 30s);
            ASSERT_TRUE(warmed);
            // The fixture's ZooKeeper server may be a child of ours: compare, not count.
            const auto children_before = children();
            const std::size_t fds_before = open_fds();
            std::vector<task_spec> reqs(200, task_spec{"quick", 1});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            std::size_t ok = 0;
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << (r->error ? r->error->message : "");
                ok += r->state == task_state::succeeded ? 1 : 0;
            }
            EXPECT_EQ(ok, 200U);
            EXPECT_EQ(open_fds(), fds_before);
            EXPECT_EQ(children(), children_before);
            co_await tc.flush();
        }(),
        180s
    );
}

// --- real `zkd run` processes -----------------------------------------------------------------

class ExecZkd : public zkd::test::zkd_cluster_test {
protected:
    ExecZkd() : zkd_cluster_test("exec", ZKD_BINARY) {}
};

TEST_F(ExecZkd, StartUpRefusesAMissingOrNonExecutableProgramNamingTheType) {
    const auto plain = dir_ / "plain.txt";
    std::ofstream(plain) << "data\n";
    auto missing = zkd::test::run_command(
        {ZKD_BINARY, "run", "--zk", zk_, "--exec", "gone=" + (dir_ / "nope").string() + " arg"}
    );
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("exec type 'gone'"), std::string::npos) << missing.err;
    EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;

    const auto config = dir_ / "zkd.conf";
    std::ofstream(config) << "exec.data = " << plain.string() << "\nexec.data.timeout = 5s\n";
    auto not_exec =
        zkd::test::run_command({ZKD_BINARY, "run", "--zk", zk_, "--config", config.string()});
    EXPECT_EQ(not_exec.exit_code, 2);
    EXPECT_NE(not_exec.err.find("exec type 'data'"), std::string::npos) << not_exec.err;
    EXPECT_NE(not_exec.err.find("is not executable"), std::string::npos) << not_exec.err;
}

TEST_F(ExecZkd, StartUpRefusesAMistypedSettingOrATypeGivenTwiceSayingWhere) {
    const auto config = dir_ / "typo.conf";
    std::ofstream(config) << "exec.cat = /bin/cat   # trailing comments are fine\n"
                          << "exec.cat.timout = 5s  # but not a typo\n";
    auto typo =
        zkd::test::run_command({ZKD_BINARY, "run", "--zk", zk_, "--config", config.string()});
    EXPECT_EQ(typo.exit_code, 2);
    EXPECT_NE(
        typo.err.find(
            config.string() +
            ":2: exec.cat.timout: unknown setting 'timout' of exec type 'cat' (did you mean "
            "'timeout'?)"
        ),
        std::string::npos
    ) << typo.err;

    auto twice = zkd::test::run_command(
        {ZKD_BINARY, "run", "--zk", zk_, "--exec", "x=/bin/cat", "--exec", "x=/bin/echo"}
    );
    EXPECT_EQ(twice.exit_code, 2);
    EXPECT_NE(twice.err.find("--exec x: the type is given twice"), std::string::npos) << twice.err;
}

TEST_F(ExecZkd, KillingTheWorkerKillsItsProgramAndTheTaskCompletesElsewhere) {
    // The first run sleeps (and is orphaned when its worker dies); the rerun answers.
    const auto pids = dir_ / "pids";
    const auto first = dir_ / "first";
    const auto script = write_script(
        dir_, "once.sh",
        "if [ -e " + first.string() +
            " ]; then cat; exit 0; fi\n"
            "touch " +
            first.string() + "; echo $$ > " + pids.string() + "; exec sleep 60"
    );
    start("a", {"--exec", "once=" + script});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            std::vector<task_spec> reqs{{"once", json::value("again")}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            ZKD_AWAIT_CONDITION(pid_in(pids) > 0, 30s);
            const pid_t program = pid_in(pids);
            ASSERT_TRUE(alive(program));
            nodes_.at("a")->kill(SIGKILL);
            ZKD_AWAIT_CONDITION(!alive(program), 10s);
            EXPECT_FALSE(alive(program)) << "pid " << program << " outlived its worker";
            start("b", {"--exec", "once=" + script});
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 60s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->value, json::value("again"));
            EXPECT_EQ(r->worker.rfind("b-", 0), 0U) << r->worker;
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(ExecZkd, ABundleRunsNoMoreProgramsAtOnceThanTheWorkersCapacity) {
    // A bundle takes one slot and starts its tasks together: a type that names no
    // concurrency still runs at most --capacity (2 here) programs at once. Each program
    // counts those running, itself included.
    const auto live = dir_ / "live";
    const auto seen = dir_ / "seen";
    fs::create_directories(live);
    const auto script = write_script(
        dir_, "count.sh",
        "touch " + live.string() + "/$$; ls " + live.string() + " | wc -l >> " + seen.string() +
            "; sleep 0.3; rm " + live.string() + "/$$; cat"
    );
    start("a", {"--exec", "count=" + script});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            std::vector<task_spec> reqs;
            for (int i = 0; i < 6; ++i) {
                reqs.push_back({"count", json::value(i)});
            }
            submit_options so;
            so.bundle = 6;
            auto ids = co_await tc.submit(std::move(reqs), so);
            ASSERT_TRUE(ids) << ids.error().message();
            for (std::size_t i = 0; i < ids->size(); ++i) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait((*ids)[i]), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << (r->error ? r->error->message : "");
                EXPECT_EQ(r->value, json::value(static_cast<int>(i)));
            }
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
    std::ifstream in(seen);
    int most = 0;
    int lines = 0;
    for (int n = 0; in >> n; ++lines) {
        most = std::max(most, n);
    }
    EXPECT_EQ(lines, 6);
    EXPECT_GE(most, 1);
    EXPECT_LE(most, 2) << "programs of one bundle ran past the worker's capacity";
}

TEST_F(ExecZkd, KillingTheWorkerKillsItsProgramsWholeTreeAndATimeoutDoesToo) {
    const auto pids = dir_ / "pids";
    const auto script = tree_script(dir_, pids);
    start("a", {"--exec", "tree=" + script});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            // A timeout stops the whole tree.
            std::vector<task_spec> timed{{"tree", 1}};
            timed.front().timeout = 1500ms;
            timed.front().max_attempts = 1;
            auto first = co_await tc.submit(std::move(timed));
            ASSERT_TRUE(first);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(first->front()), 60s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::timed_out);
            const auto stopped = pids_in(pids);
            EXPECT_EQ(stopped.size(), 4U) << read_file(pids);
            ZKD_AWAIT_CONDITION(!any_alive(stopped), 10s);
            EXPECT_FALSE(any_alive(stopped)) << read_file(pids);
            fs::remove(pids);
            // kill -9 of the worker: none of the tree outlives it.
            std::vector<task_spec> reqs{{"tree", 2}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            ZKD_AWAIT_CONDITION(pids_in(pids).size() == 4, 30s);
            const auto tree = pids_in(pids);
            ASSERT_EQ(tree.size(), 4U);
            ASSERT_TRUE(any_alive(tree));
            nodes_.at("a")->kill(SIGKILL);
            ZKD_AWAIT_CONDITION(!any_alive(tree), 5s);
            EXPECT_FALSE(any_alive(tree)) << "outlived their worker: " << read_file(pids);
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(ExecZkd, DrainLetsARunningProgramFinishThenStopsThoseStillRunningAfterTheGrace) {
    const auto go = dir_ / "go";
    const auto gated = write_script(
        dir_, "gated.sh",
        "echo $$ > " + (dir_ / "gated.pid").string() +
            "\n"
            "while [ ! -e " +
            go.string() + " ]; do sleep 0.02; done; echo '\"finished\"'"
    );
    const auto forever = write_script(
        dir_, "forever.sh", "echo $$ > " + (dir_ / "forever.pid").string() + "; exec sleep 60"
    );
    start("boss", {"--role", "standby"});
    start("leaver", {"--role", "worker", "--grace", "20000", "--exec", "gated=" + gated});
    start("short", {"--role", "worker", "--grace", "300", "--exec", "forever=" + forever});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            std::vector<task_spec> reqs{{"gated", 1}, {"forever", 2}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            ZKD_AWAIT_CONDITION(
                pid_in(dir_ / "gated.pid") > 0 && pid_in(dir_ / "forever.pid") > 0, 30s
            );
            const pid_t stuck = pid_in(dir_ / "forever.pid");
            ASSERT_TRUE(alive(stuck));
            nodes_.at("leaver")->kill(SIGTERM);
            nodes_.at("short")->kill(SIGTERM);
            // Past its grace, `short` stops its program and leaves; the task goes back to the
            // queue.
            EXPECT_EQ(nodes_.at("short")->wait_exit(20s), 0);
            EXPECT_FALSE(alive(stuck));
            // `leaver` waits for its program, which finishes once told to.
            std::ofstream(go) << "";
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->value, json::value("finished"));
            EXPECT_EQ(r->worker.rfind("leaver-", 0), 0U) << r->worker;
            EXPECT_EQ(nodes_.at("leaver")->wait_exit(20s), 0);
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(ExecZkd, TheCommandLineShowsExecTypesAndProgress) {
    const auto go = dir_ / "go";
    const auto script = write_script(
        dir_, "steps.sh",
        "echo '{\"progress\":0.4,\"message\":\"working\"}' >&3\n"
        "while [ ! -e " +
            go.string() + " ]; do sleep 0.02; done; cat"
    );
    start("a", {"--exec", "steps=" + script});
    const auto cli = [&](std::vector<std::string> words) {
        std::vector<std::string> argv{ZKD_BINARY};
        argv.insert(argv.end(), words.begin(), words.end());
        argv.insert(argv.end(), {"--zk", zk_, "--namespace", "exec"});
        return zkd::test::run_command(argv);
    };
    // Submitting waits for the cluster to exist (the node creates it).
    zkd::test::command_result sub;
    for (int i = 0; i < 200 && sub.exit_code != 0; ++i) {
        sub = cli({"submit", "steps", "{\"n\":1}"});
        if (sub.exit_code != 0) {
            ::usleep(50'000);
        }
    }
    ASSERT_EQ(sub.exit_code, 0) << sub.err;
    const std::string id = sub.out.substr(0, sub.out.find('\n'));
    zkd::test::command_result st;
    for (int i = 0; i < 300 && st.out.find("40% working") == std::string::npos; ++i) {
        ::usleep(50'000);
        st = cli({"status", id});
    }
    EXPECT_NE(st.out.find("running on a-"), std::string::npos) << st.out << st.err;
    EXPECT_NE(st.out.find("40% working"), std::string::npos) << st.out << st.err;
    const auto tasks = cli({"tasks"});
    EXPECT_NE(tasks.out.find("40% working"), std::string::npos) << tasks.out << tasks.err;
    const auto view = cli({"cluster"});
    EXPECT_NE(view.out.find("steps"), std::string::npos) << view.out << view.err;
    std::ofstream(go) << "";
    const auto waited = cli({"wait", id, "--timeout", "30s"});
    EXPECT_EQ(waited.exit_code, 0) << waited.err;
    EXPECT_NE(waited.out.find(R"("value":{"n":1})"), std::string::npos) << waited.out;
}

}  // namespace

}  // namespace ZKD_UNITY_ID
