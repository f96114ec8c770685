// SPDX-License-Identifier: MIT
// Exec types with real processes: programs run by the exec handler alone (ExecProgram), by
// a worker of an in-process cluster on a real ZooKeeper (ExecCluster), and by real `zkd run`
// processes (ExecZkd). The programs are small shell scripts each test writes.
#include "roles/exec.hpp"
#include "roles/task_client.hpp"
#include "support/processes.hpp"
#include "support/roles_cluster.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;
using namespace zkd::roles;

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

std::string read_file(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
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
        std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{}));
}

/// True if this process has a child (running or a zombie nobody reaped).
bool has_children() {
    siginfo_t info{};
    return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

exec::program make_program(const std::string& name, std::vector<std::string> argv,
                           exec::output_mode mode = exec::output_mode::json) {
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
    void SetUp() override { dir_ = zkd::test::make_test_dir("exec", test_name()); }
    void TearDown() override { fs::remove_all(dir_); }

    std::string script(const std::string& name, const std::string& body) {
        return write_script(dir_, name, body);
    }

    /// Registers `p` (once) and runs one task of it; `stop_when`, if given, is polled every
    /// 10 ms while it runs and requests stop once it is true.
    handler_result call(exec::program p, json::value args,
                        const std::function<bool()>& stop_when = {}) {
        const std::string type = p.config.name;
        if (reg_.find_async(type) == nullptr) {
            exec::add_exec_type(reg_, std::move(p));
        }
        std::stop_source stop;
        std::optional<handler_result> got;
        async_call c;
        c.args = std::move(args);
        c.task = "t-1";
        c.stop = stop.get_token();
        c.started = [] {};
        c.progress = [this](double f, std::string m) { progress_.emplace_back(f, std::move(m)); };
        asio::co_spawn(ioc_, run_async_handler(reg_, type, std::move(c)),
                       [&](const std::exception_ptr&, handler_result r) { got = std::move(r); });
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
        zkd::test::run_until(ioc_, [&] { return got.has_value(); }, 30s);
        poll.cancel();
        ioc_.run_for(10ms);  // let the poll timer's handler go
        return *got;
    }

    fs::path dir_;
    asio::io_context ioc_;
    registry reg_;
    std::vector<std::pair<double, std::string>> progress_;
};

TEST_F(ExecProgram, ExitZeroSucceedsAndNonZeroFailsWithTheCodeAndStderr) {
    auto ok = call(make_program("ok", {script("ok.sh", "cat >/dev/null; echo '{\"ok\": true}'")}), 1);
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(*ok, json::parse(R"({"ok":true})"));

    auto bad = call(make_program("bad", {script("bad.sh", "echo 'first line' >&2; echo 'bad input' >&2; exit 3")}), 1);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, "handler_error");
    EXPECT_EQ(bad.error().message, "the program exited with code 3; stderr: first line\nbad input");
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
    auto p = make_program("yes", {script("yes.sh", "echo $$ > " + (dir_ / "pid").string() + "; exec yes")},
                          exec::output_mode::text);
    p.config.max_output = 64 * 1024;
    auto r = call(std::move(p), 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "output_too_large");
    EXPECT_FALSE(process_exists(pid_in(dir_ / "pid")));
    EXPECT_FALSE(has_children());
}

TEST_F(ExecProgram, StopSendsSigtermToTheGroupAndTheProgramIsReaped) {
    const auto pidfile = dir_ / "pid";
    auto p = make_program("sleepy", {script("sleepy.sh", "echo $$ > " + pidfile.string() + "; exec sleep 30")});
    auto r = call(std::move(p), 1, [&] { return pid_in(pidfile) > 0; });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "cancelled");
    EXPECT_NE(r.error().message.find("SIGTERM"), std::string::npos) << r.error().message;
    EXPECT_FALSE(process_exists(pid_in(pidfile)));
    EXPECT_FALSE(has_children());
}

TEST_F(ExecProgram, AProgramIgnoringSigtermGetsSigkillAfterTheGrace) {
    const auto started = dir_ / "started";
    // Its trap reports the SIGTERM and carries on; only SIGKILL ends it.
    auto p = make_program("stubborn", {script("stubborn.sh", "trap 'echo got-term >&2' TERM; touch " +
                                                                 started.string() +
                                                                 "; while :; do sleep 0.05; done")});
    auto r = call(std::move(p), 1, [&] { return fs::exists(started); });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "cancelled");
    EXPECT_NE(r.error().message.find("SIGKILL"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("got-term"), std::string::npos) << r.error().message;
    EXPECT_FALSE(has_children());
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
    EXPECT_EQ(lines, (std::set<std::string>{"ZKD_EXEC_TEST_KEEP=kept", "MODE=fast", "ZKD_TASK_ID=t-1",
                                            "ZKD_TASK_TYPE=env", "ZKD_PROGRESS_FD=3"}));
}

TEST_F(ExecProgram, ArgsWithShellMetacharactersAndUnicodeArriveVerbatim) {
    const auto args = json::parse(
        R"({"s":"'; rm -rf / $(id) `id` \"q\" \\ | & > < * ~ $HOME\n\t","u":"ünïcødé 日本 😀","n":[1,2.5,null,true]})");
    const auto in_file = dir_ / "stdin";
    auto r = call(make_program("raw", {script("raw.sh", "cat > " + in_file.string() + "; cat " + in_file.string())}),
                  args);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, args);
    EXPECT_EQ(read_file(in_file), json::serialize(args));  // exactly the task's JSON

    // The operator's argv is not a shell command line either.
    auto lit = call(make_program("lit", {script("lit.sh", "printf '%s|%s' \"$1\" \"$2\""), "$HOME", "a;b"},
                                 exec::output_mode::text),
                    1);
    ASSERT_TRUE(lit) << lit.error().message;
    EXPECT_EQ(*lit, json::value("$HOME|a;b"));
}

TEST_F(ExecProgram, InheritedDescriptorsAreClosedInTheProgram) {
    const int leak = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
    ASSERT_GE(leak, 0);
    ASSERT_EQ(::dup2(leak, 50), 50);
    auto r = call(make_program("fds", {script("fds.sh", "if [ -e /proc/self/fd/50 ]; then echo '\"open\"'; "
                                                        "else echo '\"closed\"'; fi")}),
                  1);
    ::close(50);
    ::close(leak);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, json::value("closed"));
}

TEST_F(ExecProgram, ProgressLinesOnFd3ReachTheCallback) {
    auto r = call(make_program("steps", {script("steps.sh", "echo '{\"progress\":0.25,\"message\":\"a\"}' >&3; "
                                                            "echo 'not progress' >&3; "
                                                            "echo '{\"progress\":1,\"message\":\"done\"}' >&3; "
                                                            "echo 7")}),
                  1);
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
    EXPECT_FALSE(has_children());
}

TEST_F(ExecProgram, ConcurrencyIsLimitedPerType) {
    const auto lock = dir_ / "lock";
    auto p = make_program("one", {script("one.sh", "mkdir " + lock.string() + " || exit 9; sleep 0.05; rmdir " +
                                                       lock.string() + "; echo 1")});
    p.config.concurrency = 1;
    exec::add_exec_type(reg_, std::move(p));
    std::vector<handler_result> got;
    for (int i = 0; i < 4; ++i) {
        async_call c;
        c.args = i;
        c.started = [] {};
        c.progress = [](double, const std::string&) {};
        asio::co_spawn(ioc_, run_async_handler(reg_, "one", std::move(c)),
                       [&](const std::exception_ptr&, handler_result r) { got.push_back(std::move(r)); });
    }
    zkd::test::run_until(ioc_, [&] { return got.size() == 4; }, 30s);
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
    ASSERT_FALSE(has_children());
    const std::size_t fds_before = open_fds();
    std::size_t ok = 0;
    std::size_t done = 0;
    for (int i = 0; i < 200; ++i) {
        async_call c;
        c.args = i;
        c.started = [] {};
        c.progress = [](double, const std::string&) {};
        asio::co_spawn(ioc_, run_async_handler(reg_, "quick", std::move(c)),
                       [&](const std::exception_ptr&, handler_result r) {
                           ok += r ? 1 : 0;
                           ++done;
                       });
    }
    zkd::test::run_until(ioc_, [&] { return done == 200; }, 60s);
    EXPECT_EQ(ok, 200U);
    EXPECT_EQ(open_fds(), fds_before);
    EXPECT_FALSE(has_children());
}

}  // namespace
