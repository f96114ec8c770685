// SPDX-License-Identifier: MIT
// zkd-chaos: runs a local zkd cluster under a seeded schedule of faults while it drives a
// load of tasks with unique args, then checks that every task got exactly one correct result
// and nothing was left behind. See --help and docs/chaos.md. Over 700 lines: the cluster,
// the load, the fault schedule's actions and the report share one run's state (the checker
// and the options are apart, unit-tested).
#include "chaos/checker.hpp"
#include "chaos/jobs.hpp"
#include "chaos/options.hpp"
#include "chaos/schedule.hpp"
#include "chaos/zk_log.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/offload.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/schedule/client.hpp"
#include "roles/workflow/client.hpp"
#include "workflow/ids.hpp"
#include "zk_local/zk_local.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <random>
#include <set>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace zkd::chaos {
namespace {

using clock_type = std::chrono::steady_clock;

/// The chaos client's own session: long enough to ride out a member restart.
constexpr auto client_session_timeout = 30s;
/// How long a zkd may take to drain and leave after the final SIGTERM (its --grace is 5 s).
constexpr auto stop_limit = 20s;

std::string seconds(std::int64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fs", static_cast<double>(ms) / 1000.0);
    return buf;
}

/// The zkd program: --zkd, else next to us, else the build tree's, else PATH.
std::string find_zkd(const std::string& given) {
    if (!given.empty()) {
        return given;
    }
    std::error_code ec;
    const auto self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        for (const auto& p : {self.parent_path() / "zkd", self.parent_path() / "../../src/zkd"}) {
            if (::access(p.c_str(), X_OK) == 0) {
                return fs::weakly_canonical(p).string();
            }
        }
    }
    const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): before any thread
    std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t from = 0;
    while (from <= dirs.size()) {
        const auto colon = dirs.find(':', from);
        const fs::path p = fs::path(dirs.substr(from, colon - from)) / "zkd";
        if (::access(p.c_str(), X_OK) == 0) {
            return p.string();
        }
        if (colon == std::string::npos) {
            break;
        }
        from = colon + 1;
    }
    return {};
}

/// The first line of a log that says the process crashed: a sanitizer report, an abort, an
/// uncaught exception. Empty: none.
std::string crash_evidence(const fs::path& log) {
    static const char* const markers[] = {
        "ERROR: AddressSanitizer",
        "ERROR: LeakSanitizer",
        "WARNING: ThreadSanitizer",
        "runtime error:",
        "SUMMARY: UndefinedBehaviorSanitizer",
        "terminate called",
        "Assertion `",
        " critical "};
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
        for (const char* m : markers) {
            if (line.find(m) != std::string::npos) {
                return line.size() > 200 ? line.substr(0, 200) + "..." : line;
            }
        }
    }
    return {};
}

std::int64_t epoch_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()
    )
        .count();
}

/// What the checks use of a result.
job_result to_job_result(const protocol::task_result& r, std::string id) {
    job_result j;
    j.id = std::move(id);
    j.state = std::string(protocol::to_string(r.state));
    j.value = r.value;
    j.error_code = r.error ? r.error->code : std::string();
    j.worker = r.worker;
    j.attempt = r.attempt;
    j.try_number = r.try_number;
    j.started_ms = r.started_ms;
    j.finished_ms = r.finished_ms;
    for (const auto& e : r.errors) {
        const auto* o = e.if_object();
        const auto* f = o != nullptr ? o->if_contains("finished_ms") : nullptr;
        j.error_finished_ms.push_back(f != nullptr && f->is_int64() ? f->get_int64() : 0);
    }
    return j;
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), {}};
}

/// One `zkd run` slot: a process, restarted as a new one after chaos kills it.
struct zkd_slot {
    int index = 0;
    pid_t pid = 0;  ///< 0: not running
    int starts = 0;
    bool paused = false;
    bool killed = false;       ///< chaos sent SIGKILL to the current process
    bool terminated = false;   ///< chaos sent SIGTERM (the final stop)
    bool partitioned = false;  ///< its veth link is down
    fs::path log;
    // --partitions: its network namespace, the veth pair's ends, and how it reaches ZooKeeper.
    std::string netns;
    std::string veth_host;
    std::string veth_ns;
    std::string connect;
    [[nodiscard]] std::string name() const { return "zkd" + std::to_string(index + 1); }
    [[nodiscard]] bool active() const {
        return pid > 0 && !paused && !killed && !terminated && !partitioned;
    }
};

/// The `ip` program (iproute2), for --partitions; empty when none is found.
std::string find_ip() {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
        if (::access(p, X_OK) == 0) {
            return p;
        }
    }
    return {};
}

class chaos_run {
public:
    chaos_run(
        asio::io_context& ioc,
        settings s,
        std::uint64_t seed,
        fs::path dir,
        zk_local::cluster& ensemble,
        std::string zkd,
        bool break_result,
        std::string ip
    )
        : ioc_(ioc),
          s_(std::move(s)),
          seed_(seed),
          dir_(std::move(dir)),
          ensemble_(ensemble),
          zkd_(std::move(zkd)),
          break_result_(break_result),
          ip_(std::move(ip)),
          step_program_(dir_ / "chaos-step.sh"),
          start_log_(dir_ / "starts.log"),
          connect_(ensemble.connect_string()),
          loads_(ioc.get_executor()),
          restores_(ioc.get_executor()),
          aux_(ioc.get_executor()) {
        for (int i = 0; i < s_.zkd_count; ++i) {
            zkd_slot z;
            z.index = i;
            slots_.push_back(z);
        }
    }

    /// The whole run; yields the exit code.
    asio::awaitable<int> run();

    /// SIGINT/SIGTERM: stop the load early, then settle and check as usual.
    void interrupt() { stop_load_ = true; }

private:
    [[nodiscard]] std::int64_t now_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start_)
            .count();
    }
    void say(const std::string& line) const {
        std::fprintf(stderr, "zkd-chaos: [%8s] %s\n", seconds(now_ms()).c_str(), line.c_str());
    }
    asio::awaitable<void> sleep_until(clock_type::time_point t) {
        asio::steady_timer timer(ioc_, t);
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    /// Sleeps until `t` or until the faults stop, whichever comes first.
    asio::awaitable<void> hold_until(clock_type::time_point t) {
        while (!faults_stopped_ && clock_type::now() < t) {
            co_await sleep_until(std::min(t, clock_type::now() + 100ms));
        }
    }

    bool spawn_zkd(zkd_slot& z);
    bool write_step_program();
    /// Runs `ip ARGS...` to completion (its errors go to <run dir>/netns.log); true on exit 0.
    bool ip(std::vector<std::string> args);
    /// --partitions: a namespace and veth pair per slot; false (said why) on failure.
    bool set_up_netns();
    void tear_down_netns();
    asio::awaitable<void> restore_link(int slot, clock_type::time_point until);
    asio::awaitable<void> reap();
    void reaped(zkd_slot& z, int status);

    asio::awaitable<bool> wait_ready(std::chrono::milliseconds limit);
    asio::awaitable<void> load();
    asio::awaitable<void> submit(std::vector<protocol::task_spec> reqs, std::int64_t due_ms);
    asio::awaitable<void> wait_one(std::string id);

    asio::awaitable<void> faults(std::vector<fault> plan);
    asio::awaitable<void> inject(fault f);
    zkd_slot* pick_zkd(int target);
    asio::awaitable<void> restore_zkd(
        std::size_t rec, int slot, pid_t pid, bool pause, clock_type::time_point until
    );
    asio::awaitable<void> restore_member(
        std::size_t rec, int member, pid_t pid, bool pause, clock_type::time_point until
    );
    asio::awaitable<std::optional<pid_t>> master_pid();

    // --workload delayed, schedules, workflows (chaos/jobs.hpp).
    asio::awaitable<void> delayed_load();
    asio::awaitable<void> submit_delayed(
        std::vector<protocol::task_spec> reqs, roles::submit_options o, int retries
    );
    asio::awaitable<void> wait_delayed(std::string id);
    asio::awaitable<void> add_schedules();
    /// Reads the results of the schedules' firings not read yet.
    asio::awaitable<void> poll_schedules();
    asio::awaitable<void> schedule_poller();
    asio::awaitable<void> workflow_load();
    asio::awaitable<void> submit_workflows(std::uint64_t k);
    /// After the load: pauses the schedules (their documents final), waits until `until`
    /// for the workflows' ends and the firings' results, reads them.
    asio::awaitable<void> finish_jobs(clock_type::time_point until);
    asio::awaitable<std::vector<job_result>> read_results(
        const std::string& client, std::set<std::string>* seen
    );

    asio::awaitable<leftover_nodes> scan_leftovers();
    /// Ends a run that could not start: stops the zkds and the reaper, closes the session.
    asio::awaitable<void> abandon() {
        faults_stopped_ = true;
        co_await stop_zkds();
        reaping_ = false;
        co_await aux_.join();
        tear_down_netns();
        co_await zk_->close();
    }
    asio::awaitable<void> stop_zkds();

    asio::io_context& ioc_;
    settings s_;
    std::uint64_t seed_;
    fs::path dir_;
    zk_local::cluster& ensemble_;
    std::string zkd_;
    bool break_result_;
    std::string ip_;         ///< --partitions: the ip program
    fs::path step_program_;  ///< the chaos-step exec type's program (write_step_program)
    fs::path start_log_;
    jobs_recording jobs_;
    std::uint64_t delayed_outstanding_ = 0;
    bool jobs_stopped_ = false;  ///< the schedule poller's end
    /// Clients whose results directories the jobs leave on purpose (schedules, workflows).
    std::set<std::string> job_clients_;
    /// Per schedule (index in jobs_.schedules): the firing results read so far.
    std::vector<std::set<std::string>> schedule_seen_;
    std::string connect_;
    reactor::compute_pool zk_pool_{1};  ///< the ensemble's blocking calls, one at a time
    std::vector<zkd_slot> slots_;
    std::unique_ptr<zkco::client> zk_;
    std::optional<protocol::layout> layout_;
    std::unique_ptr<roles::task_client> client_;
    reactor::task_group loads_;
    reactor::task_group restores_;
    reactor::task_group aux_;
    recording rec_;
    clock_type::time_point start_ = clock_type::now();
    std::uint64_t outstanding_ = 0;
    int member_out_ = -1;  ///< the ZooKeeper member a fault holds down or paused
    bool faults_stopped_ = false;
    bool stop_load_ = false;
    std::uint64_t consuming_ = 0;  ///< consume() calls out: one cut short may leave its result
    bool reaping_ = true;
    std::uint64_t starts_ = 0;
};

/// The chaos-step exec type's program: a shell script in the run directory, run as
/// `/bin/sh SCRIPT START_LOG`. It appends "<task id> <attempt> <ms since the epoch>" to the
/// start log first (one O_APPEND write: lines of concurrent programs do not mix), then prints
/// its args back, or exits 1 when they hold "fail":true (zkd writes args as compact JSON). A
/// shell and two small programs start in milliseconds where a sanitized build of this tool
/// takes a tenth of a second and 50 MB: the workload measures zkd, not the step program.
bool chaos_run::write_step_program() {
    std::ofstream f(step_program_, std::ios::trunc);
    f << "# zkd-chaos's chaos-step program (docs/chaos.md \"Jobs\"): sh THIS START_LOG\n"
         "PATH=/usr/bin:/bin\n"
         "printf '%s %s %s\\n' \"${ZKD_TASK_ID:--}\" \"${ZKD_TASK_ATTEMPT:-0}\" "
         "\"$(date +%s%3N)\" >>\"$1\" || exit 3\n"
         "args=$(cat)\n"
         "case $args in\n"
         "*'\"fail\":true'*) echo 'failing on purpose (args say \"fail\": true)' >&2; exit 1 ;;\n"
         "esac\n"
         "printf '%s' \"$args\"\n";
    f.close();
    if (!f) {
        say("cannot write " + step_program_.string());
        return false;
    }
    return true;
}

bool chaos_run::spawn_zkd(zkd_slot& z) {
    ++z.starts;
    ++starts_;
    z.log = dir_ / (z.name() + "-" + std::to_string(z.starts) + ".log");
    std::vector<std::string> argv;
    if (!z.netns.empty()) {
        argv = {ip_, "netns", "exec", z.netns};
    }
    const std::vector<std::string> run{
        zkd_,
        "run",
        "--zk",
        z.connect.empty() ? connect_ : z.connect,
        "--namespace",
        s_.ns,
        "--host",
        "chaos" + z.name(),
        "--session-timeout",
        std::to_string(s_.session_timeout.count()) + "ms",
        "--capacity",
        std::to_string(s_.capacity),
        "--threads",
        "1",
        "--grace",
        "5s"};
    argv.insert(argv.end(), run.begin(), run.end());
    if (s_.work.jobs()) {
        argv.emplace_back("--exec");
        argv.push_back(
            std::string(step_type) + "=/bin/sh " + step_program_.string() + " " +
            start_log_.string()
        );
    }
    std::vector<char*> raw;
    raw.reserve(argv.size() + 1);
    for (auto& a : argv) {
        raw.push_back(a.data());
    }
    raw.push_back(nullptr);
    const int fd = ::open(z.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        say("cannot open " + z.log.string() + ": " + std::strerror(errno));
        return false;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        // Async-signal-safe calls only: the parent has threads. The child dies with us.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::execv(raw[0], raw.data());
        ::_exit(127);
    }
    ::close(fd);
    if (pid < 0) {
        say(std::string("fork: ") + std::strerror(errno));
        return false;
    }
    z.pid = pid;
    z.paused = false;
    z.killed = false;
    return true;
}

bool chaos_run::ip(std::vector<std::string> args) {
    args.insert(args.begin(), ip_);
    std::vector<char*> raw;
    raw.reserve(args.size() + 1);
    for (auto& a : args) {
        raw.push_back(a.data());
    }
    raw.push_back(nullptr);
    const auto log = dir_ / "netns.log";
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (fd >= 0) {
            ::dup2(fd, 1);
            ::dup2(fd, 2);
        }
        ::execv(raw[0], raw.data());
        ::_exit(127);
    }
    if (fd >= 0) {
        ::close(fd);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid) {
        return false;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool chaos_run::set_up_netns() {
    // 10.213.<pid % 250>.<4 slot>/30: the host end .1, the namespace's end .2.
    const auto pid = static_cast<unsigned>(::getpid());
    const std::string net = "10.213." + std::to_string(pid % 250) + ".";
    for (auto& z : slots_) {
        const auto tag = std::to_string(pid % 100'000) + "-" + std::to_string(z.index);
        z.netns = "zkd-chaos-" + tag;
        z.veth_host = "zch" + tag;
        z.veth_ns = "zcn" + tag;
        const auto host_ip = net + std::to_string(4 * z.index + 1);
        const auto ns_ip = net + std::to_string(4 * z.index + 2);
        const bool ok =
            ip({"netns", "add", z.netns}) &&
            ip({"link", "add", z.veth_host, "type", "veth", "peer", "name", z.veth_ns}) &&
            ip({"link", "set", z.veth_ns, "netns", z.netns}) &&
            ip({"addr", "add", host_ip + "/30", "dev", z.veth_host}) &&
            ip({"link", "set", z.veth_host, "up"}) &&
            ip({"netns", "exec", z.netns, ip_, "addr", "add", ns_ip + "/30", "dev", z.veth_ns}) &&
            ip({"netns", "exec", z.netns, ip_, "link", "set", z.veth_ns, "up"}) &&
            ip({"netns", "exec", z.netns, ip_, "link", "set", "lo", "up"});
        if (!ok) {
            say("setting up network namespace " + z.netns + " failed (see " +
                (dir_ / "netns.log").string() + ")");
            return false;
        }
        z.connect.clear();
        for (int m = 0; m < ensemble_.size(); ++m) {
            z.connect +=
                (m == 0 ? "" : ",") + host_ip + ":" + std::to_string(ensemble_.client_port(m));
        }
    }
    say("each zkd runs in a network namespace of its own (zkd-chaos-" +
        std::to_string(pid % 100'000) + "-N), reaching ZooKeeper over a veth pair");
    return true;
}

void chaos_run::tear_down_netns() {
    for (auto& z : slots_) {
        if (!z.netns.empty()) {
            ip({"netns", "del", z.netns});  // takes the veth pair with it
        }
    }
}

asio::awaitable<void> chaos_run::restore_link(int slot, clock_type::time_point until) {
    co_await hold_until(until);
    auto& z = slots_[static_cast<std::size_t>(slot)];
    if (ip({"link", "set", z.veth_host, "up"})) {
        say("reconnected " + z.name());
    } else {
        say("could not bring " + z.veth_host + " up again (see netns.log)");
    }
    z.partitioned = false;
}

asio::awaitable<void> chaos_run::reap() {
    while (reaping_) {
        for (auto& z : slots_) {
            if (z.pid <= 0) {
                continue;
            }
            int status = 0;
            if (::waitpid(z.pid, &status, WNOHANG) == z.pid) {
                reaped(z, status);
            }
        }
        co_await sleep_until(clock_type::now() + 50ms);
    }
}

void chaos_run::reaped(zkd_slot& z, int status) {
    process_end e;
    e.name = z.name() + "#" + std::to_string(z.starts);
    if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
    } else {
        e.exit_code = WEXITSTATUS(status);
    }
    e.expected = (z.killed && e.signal == SIGKILL) || (z.terminated && e.exit_code == 0);
    e.evidence = crash_evidence(z.log);
    if (!e.expected) {
        say(e.name + " (pid " + std::to_string(z.pid) + ") ended by itself: " +
            (e.signal != 0 ? "signal " + std::to_string(e.signal)
                           : "exit " + std::to_string(e.exit_code)) +
            "; see " + z.log.string());
    }
    rec_.ends.push_back(std::move(e));
    const bool restart = !z.killed && !z.terminated && !faults_stopped_;
    z.pid = 0;
    z.paused = false;
    if (restart) {
        // Keep the cluster at strength; the crash is reported at the end.
        spawn_zkd(z);
    }
}

asio::awaitable<bool> chaos_run::wait_ready(std::chrono::milliseconds limit) {
    const auto until = clock_type::now() + limit;
    while (clock_type::now() < until) {
        auto workers =
            co_await zkco::with_timeout(zk_->get_children(protocol::layout::workers_dir()), 5s);
        auto master = co_await zkco::with_timeout(zk_->exists(protocol::layout::master()), 5s);
        if (workers && workers->names.size() >= slots_.size() && master && master->has_value()) {
            co_return true;
        }
        co_await sleep_until(clock_type::now() + 100ms);
    }
    co_return false;
}

asio::awaitable<void> chaos_run::load() {
    const auto total = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(s_.duration.count()) / 1000.0 * s_.rate)
    );
    std::mt19937_64 nonce(seed_ ^ 0x9e3779b97f4a7c15ULL);
    const auto due = [&](std::uint64_t k) {
        return start_ + std::chrono::duration_cast<clock_type::duration>(
                            std::chrono::duration<double>(static_cast<double>(k) / s_.rate)
                        );
    };
    std::uint64_t k = 0;
    while (k < total && !stop_load_) {
        if (clock_type::now() < due(k)) {
            co_await sleep_until(due(k));
            continue;
        }
        // Whatever is due goes in one call (the client's batcher folds calls anyway).
        const auto due_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(due(k) - start_).count();
        std::vector<protocol::task_spec> reqs;
        while (k < total && due(k) <= clock_type::now() && reqs.size() < 200) {
            protocol::task_spec r;
            r.type = "echo";
            char pad[17];
            std::snprintf(pad, sizeof pad, "%016llx", static_cast<unsigned long long>(nonce()));
            r.args = json::object{{"seed", seed_}, {"k", k}, {"nonce", pad}};
            r.max_attempts = s_.max_attempts;
            reqs.push_back(std::move(r));
            ++k;
        }
        outstanding_ += reqs.size();
        loads_.spawn(submit(std::move(reqs), due_ms), "submit");
    }
    say("load done: " + std::to_string(k) + " tasks submitted or in submission");
}

asio::awaitable<void> chaos_run::submit(
    std::vector<protocol::task_spec> reqs, std::int64_t due_ms
) {
    std::vector<json::value> expected;
    expected.reserve(reqs.size());
    for (const auto& r : reqs) {
        expected.push_back(r.args);
    }
    const auto n = reqs.size();
    auto ids = co_await client_->submit(std::move(reqs));
    if (!ids) {
        ++rec_.submit_failures;
        outstanding_ -= n;
        say("a submit of " + std::to_string(n) + " tasks failed: " + ids.error().message());
        co_return;
    }
    for (std::size_t i = 0; i < ids->size(); ++i) {
        rec_.submitted.push_back({(*ids)[i], due_ms, std::move(expected[i])});
        loads_.spawn(wait_one((*ids)[i]), "wait");
    }
}

asio::awaitable<void> chaos_run::wait_one(std::string id) {
    auto r = co_await client_->await_result(id);
    --outstanding_;
    if (!r) {
        rec_.wait_errors[id] = r.error().message();
        co_return;
    }
    observed_result o;
    o.id = id;
    o.at_ms = now_ms();
    o.state = std::string(protocol::to_string(r->state));
    o.value = r->value;
    o.worker = r->worker;
    o.attempt = r->attempt;
    if (break_result_) {
        break_result_ = false;  // ZKD_CHAOS_BREAK=drop-result: forget one result, on purpose
        say("ZKD_CHAOS_BREAK: dropping the result of " + id + " from the record");
    } else {
        rec_.results.push_back(std::move(o));
    }
    ++consuming_;
    auto c = co_await client_->consume(id);
    --consuming_;
    if (!c) {
        say("consuming " + id + " failed: " + c.error().message());
    }
}

asio::awaitable<void> chaos_run::delayed_load() {
    // Every 250 ms, 3 tasks due 0.3 to 3 s later; every fourth batch fails on purpose, with
    // 2 retries after 200-400 ms.
    std::mt19937_64 rng(seed_ ^ 0xde1a7edULL);
    std::uniform_int_distribution<int> lead(300, 3000);
    const auto until = start_ + s_.duration;
    for (std::uint64_t k = 0; !stop_load_ && clock_type::now() < until; ++k) {
        const bool failing = k % 4 == 3;
        roles::submit_options o;
        o.due_ms = epoch_ms() + lead(rng);
        if (failing) {
            o.retries = 2;
            o.backoff = protocol::backoff_policy{2, 200ms, 400ms};
        }
        std::vector<protocol::task_spec> reqs;
        for (int i = 0; i < 3; ++i) {
            protocol::task_spec r;
            r.type = std::string(step_type);
            json::object args{{"seed", seed_}, {"delayed", k}, {"i", i}};
            if (failing) {
                args["fail"] = true;
            }
            r.args = std::move(args);
            r.max_attempts = s_.max_attempts;
            reqs.push_back(std::move(r));
        }
        delayed_outstanding_ += reqs.size();
        loads_.spawn(submit_delayed(std::move(reqs), o, failing ? 2 : 0), "delayed");
        co_await sleep_until(clock_type::now() + 250ms);
    }
}

asio::awaitable<void> chaos_run::submit_delayed(
    std::vector<protocol::task_spec> reqs, roles::submit_options o, int retries
) {
    std::vector<json::value> args;
    args.reserve(reqs.size());
    for (const auto& r : reqs) {
        args.push_back(r.args);
    }
    const auto n = reqs.size();
    auto ids = co_await client_->submit(std::move(reqs), o);
    if (!ids) {
        ++jobs_.delayed_submit_failures;
        delayed_outstanding_ -= n;
        say("a submit of " + std::to_string(n) + " delayed tasks failed: " + ids.error().message());
        co_return;
    }
    for (std::size_t i = 0; i < ids->size(); ++i) {
        jobs_.delayed.push_back({(*ids)[i], *o.due_ms, std::move(args[i]), retries});
        loads_.spawn(wait_delayed((*ids)[i]), "wait delayed");
    }
}

asio::awaitable<void> chaos_run::wait_delayed(std::string id) {
    auto r = co_await client_->await_result(id);
    --delayed_outstanding_;
    if (!r) {
        jobs_.delayed_wait_errors[id] = r.error().message();
        co_return;
    }
    jobs_.delayed_results.push_back(to_job_result(*r, id));
    ++consuming_;
    auto c = co_await client_->consume(id);
    --consuming_;
    if (!c) {
        say("consuming " + id + " failed: " + c.error().message());
    }
}

asio::awaitable<void> chaos_run::add_schedules() {
    for (const char* misfire : {"all", "once", "skip"}) {
        const std::string name = std::string("chaos-") + misfire;
        const json::object args{{"schedule", name}, {"seed", seed_}};
        const json::object req{
            {"name", name}, {"every_ms", 1000},   {"type", std::string(step_type)},
            {"args", args}, {"misfire", misfire}, {"max_attempts", s_.max_attempts}};
        auto added = co_await roles::add_schedule(*zk_, req);
        if (!added) {
            say("adding schedule " + name + " failed: " + added.error().message);
            schedule_record rec;
            rec.name = name;
            rec.misfire = misfire;
            jobs_.schedules.push_back(std::move(rec));  // unread: a violation at the end
            schedule_seen_.emplace_back();
            continue;
        }
        schedule_record rec;
        rec.name = name;
        rec.misfire = misfire;
        rec.every_ms = added->every_ms;
        rec.priority = added->priority;
        rec.client = added->client;
        rec.args = args;
        rec.created_ms = added->created_ms;
        job_clients_.insert(rec.client);
        jobs_.schedules.push_back(std::move(rec));
        schedule_seen_.emplace_back();
    }
    say("added 3 schedules every 1s (chaos-all, chaos-once, chaos-skip)");
}

asio::awaitable<std::vector<job_result>> chaos_run::read_results(
    const std::string& client, std::set<std::string>* seen
) {
    std::vector<job_result> out;
    const auto dir = protocol::layout::client_results(client);
    auto kids = co_await zkco::with_timeout(zk_->get_children(dir), 10s);
    if (!kids) {
        co_return out;
    }
    auto names = kids->names;
    std::sort(names.begin(), names.end());
    for (const auto& id : names) {
        // Marked before the read: two readers never record one result twice.
        if (seen != nullptr && !seen->insert(id).second) {
            continue;
        }
        auto node = co_await zkco::with_timeout(zk_->get(zkco::join_path(dir, id)), 10s);
        if (!node) {
            if (seen != nullptr) {
                seen->erase(id);  // the session failed (or it was collected): next time
            }
            continue;
        }
        auto res = protocol::decode_result(node->data);
        if (!res) {
            job_result garbage;
            garbage.id = id;
            garbage.state = "garbage";
            out.push_back(std::move(garbage));
        } else {
            out.push_back(to_job_result(*res, id));
        }
    }
    co_return out;
}

asio::awaitable<void> chaos_run::poll_schedules() {
    for (std::size_t i = 0; i < jobs_.schedules.size(); ++i) {
        if (jobs_.schedules[i].client.empty()) {
            continue;
        }
        auto got = co_await read_results(jobs_.schedules[i].client, &schedule_seen_[i]);
        for (auto& g : got) {
            jobs_.schedules[i].results.push_back(std::move(g));
        }
    }
}

asio::awaitable<void> chaos_run::schedule_poller() {
    // The master keeps a schedule's latest 100 firings' results: read them as they come.
    while (!jobs_stopped_) {
        co_await poll_schedules();
        for (int i = 0; i < 20 && !jobs_stopped_; ++i) {
            co_await sleep_until(clock_type::now() + 100ms);
        }
    }
}

asio::awaitable<void> chaos_run::workflow_load() {
    const auto until = start_ + s_.duration;
    for (std::uint64_t k = 0; !stop_load_ && clock_type::now() < until; ++k) {
        co_await submit_workflows(k);
        for (int i = 0; i < 40 && !stop_load_ && clock_type::now() < until; ++i) {
            co_await sleep_until(clock_type::now() + 100ms);
        }
    }
}

asio::awaitable<void> chaos_run::submit_workflows(std::uint64_t k) {
    const std::string type(step_type);
    const auto step = [&](json::value args, std::vector<std::string> after = {}) {
        json::object o{
            {"type", type}, {"args", std::move(args)}, {"max_attempts", s_.max_attempts}};
        if (!after.empty()) {
            json::array a;
            for (auto& n : after) {
                a.emplace_back(n);
            }
            o["after"] = std::move(a);
        }
        return o;
    };
    const auto kk = static_cast<std::int64_t>(k);
    struct shape {
        const char* name;
        json::object steps;
        const char* fan_in;  ///< the fan-in step, nullptr: none
    };
    std::vector<shape> shapes;
    {
        json::object chain;
        chain["c0"] = step(json::object{{"chain", kk}, {"c", 0}});
        for (int i = 1; i < 6; ++i) {
            chain["c" + std::to_string(i)] =
                step(json::object{{"c", i}}, {"c" + std::to_string(i - 1)});
        }
        shapes.push_back({"chain", std::move(chain), nullptr});
    }
    {
        json::array items;
        for (std::int64_t i = 0; i < 12; ++i) {
            items.emplace_back(kk * 100 + i);
        }
        json::object map;
        map["src"] = step(std::move(items));
        map["each"] =
            json::object{{"type", type}, {"map", "src"}, {"max_attempts", s_.max_attempts}};
        map["fanin"] = step(json::object{{"n", 12}, {"map", kk}}, {"each"});
        shapes.push_back({"map", std::move(map), "fanin"});
    }
    {
        json::object dag;
        dag["a"] = step(json::object{{"dag", kk}});
        dag["b"] = step(json::object{{"b", 1}}, {"a"});
        dag["c"] = step(json::object{{"c", 1}}, {"a"});
        dag["d"] = step(json::object{{"d", 1}}, {"b", "c"});
        dag["e"] = step(json::object{{"e", 1}}, {"a", "d"});
        shapes.push_back({"dag", std::move(dag), "d"});
    }
    for (auto& sh : shapes) {
        json::object spec{{"name", std::string("chaos-") + sh.name}, {"steps", sh.steps}};
        roles::workflow_submit_options opts;
        opts.allow_unserved = true;
        auto id = co_await roles::submit_workflow(*zk_, json::serialize(spec), opts);
        if (!id) {
            ++jobs_.workflow_submit_failures;
            say(std::string("submitting a ") + sh.name + " workflow failed: " + id.error().message);
            continue;
        }
        workflow_record w;
        w.id = *id;
        w.shape = sh.name;
        const auto outcome = echo_workflow_outcome(spec);
        w.expected_result = outcome.result;
        w.expected_tasks = outcome.tasks;
        const auto ref = workflow::parse_workflow_id(*id);
        if (ref) {
            job_clients_.insert(workflow::client_hex(ref->client));
            if (sh.fan_in != nullptr) {
                // A step that is no map step has its index in name order as its number.
                std::vector<std::string> names;
                for (const auto& [n, v] : sh.steps) {
                    names.emplace_back(n);
                }
                std::sort(names.begin(), names.end());
                const auto at = std::find(names.begin(), names.end(), sh.fan_in) - names.begin();
                w.fan_in_task = workflow::step_task_id(
                    *ref, protocol::default_priority, static_cast<std::uint64_t>(at)
                );
            }
        }
        jobs_.workflows.push_back(std::move(w));
    }
}

asio::awaitable<void> chaos_run::finish_jobs(clock_type::time_point until) {
    // The schedules: paused, their documents final (a master's S4 after it fails: bad_version).
    for (auto& sr : jobs_.schedules) {
        if (sr.client.empty()) {
            continue;
        }
        auto paused = co_await roles::pause_schedule(*zk_, sr.name, true);
        if (!paused) {
            say("pausing schedule " + sr.name + " failed: " + paused.error().message);
            continue;
        }
        sr.final_read = true;
        sr.last_due_ms = paused->last_due_ms;
        sr.fired = paused->fired;
        sr.missed = paused->missed;
        sr.skipped = paused->skipped;
    }
    // Every firing's result, within the settle time.
    for (;;) {
        co_await poll_schedules();
        bool complete = true;
        for (std::size_t i = 0; i < jobs_.schedules.size(); ++i) {
            complete = complete && schedule_seen_[i].size() >= jobs_.schedules[i].fired;
        }
        if (complete || clock_type::now() >= until) {
            break;
        }
        co_await sleep_until(clock_type::now() + 250ms);
    }
    jobs_stopped_ = true;
    for (auto& w : jobs_.workflows) {
        const auto left = std::max(
            std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()),
            std::chrono::milliseconds(1000)
        );
        auto done = co_await roles::wait_workflow(*zk_, w.id, left);
        if (!done) {
            w.error = done.error().message;
            // Read what it is, for the report.
            if (auto now = co_await roles::read_workflow(*zk_, w.id)) {
                w.status = std::string(workflow::to_string(now->status));
                w.result = json::value(now->result);
            }
        } else {
            w.status = std::string(workflow::to_string(done->status));
            w.result = json::value(done->result);
            for (const auto& st : done->steps) {
                if (st.error) {
                    w.error += (w.error.empty() ? "" : "; ") + st.name + ": " + st.error->code +
                               " " + st.error->message;
                }
            }
        }
        if (const auto ref = workflow::parse_workflow_id(w.id)) {
            w.results = co_await read_results(workflow::client_hex(ref->client), nullptr);
        }
    }
}

zkd_slot* chaos_run::pick_zkd(int target) {
    const auto active =
        std::count_if(slots_.begin(), slots_.end(), [](const auto& z) { return z.active(); });
    if (active < 2) {
        return nullptr;  // never take out the last one
    }
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        auto& z = slots_[(static_cast<std::size_t>(target) + i) % slots_.size()];
        if (z.active()) {
            return &z;
        }
    }
    return nullptr;
}

asio::awaitable<std::optional<pid_t>> chaos_run::master_pid() {
    auto node = co_await zkco::with_timeout(zk_->get(protocol::layout::master()), 5s);
    if (!node) {
        co_return std::nullopt;
    }
    auto m = protocol::decode_master(node->data);
    if (!m) {
        co_return std::nullopt;
    }
    co_return static_cast<pid_t>(m->pid);
}

asio::awaitable<void> chaos_run::faults(std::vector<fault> plan) {
    for (const auto& f : plan) {
        // In steps, so that an interrupted run does not wait here for the next fault's time.
        while (!stop_load_ && !faults_stopped_ && clock_type::now() < start_ + f.at) {
            co_await sleep_until(std::min(start_ + f.at, clock_type::now() + 100ms));
        }
        if (stop_load_ || faults_stopped_) {
            break;
        }
        co_await inject(f);
    }
}

asio::awaitable<void> chaos_run::inject(fault f) {
    injected_fault r;
    r.planned = f;
    r.at_ms = now_ms();
    const auto until = clock_type::now() + f.hold;
    const auto skip = [&](std::string why) {
        r.skipped = true;
        r.note = std::move(why);
        say(std::string(name(f.kind)) + " skipped: " + r.note);
        rec_.faults.push_back(r);
    };
    switch (f.kind) {
    case fault_kind::zkd_kill:
    case fault_kind::zkd_pause:
    case fault_kind::zkd_partition:
    case fault_kind::master_kill: {
        zkd_slot* z = nullptr;
        const auto master = co_await master_pid();
        if (f.kind == fault_kind::master_kill) {
            const auto& pid = master;
            if (!pid) {
                skip("no master in /master");
                co_return;
            }
            const auto it = std::find_if(slots_.begin(), slots_.end(), [&](const auto& s) {
                return s.pid == *pid;
            });
            if (it == slots_.end() || !it->active()) {
                skip("the master (pid " + std::to_string(*pid) + ") is not a running zkd of ours");
                co_return;
            }
            if (pick_zkd(it->index) == nullptr) {
                skip("it is the last zkd running");
                co_return;
            }
            z = &*it;
        } else {
            z = pick_zkd(f.target);
            if (z == nullptr) {
                skip("fewer than two zkd running");
                co_return;
            }
        }
        const bool pause = f.kind == fault_kind::zkd_pause;
        r.target =
            z->name() + " (pid " + std::to_string(z->pid) + (master == z->pid ? ", master)" : ")");
        if (f.kind == fault_kind::zkd_partition) {
            if (z->netns.empty() || !ip({"link", "set", z->veth_host, "down"})) {
                skip("no veth link to cut (run with --partitions)");
                co_return;
            }
            z->partitioned = true;
            say(std::string(name(f.kind)) + " " + r.target + " cut off for " +
                seconds(f.hold.count()));
            rec_.faults.push_back(r);
            restores_.spawn(restore_link(z->index, until), "restore");
            break;
        }
        if (pause) {
            ::kill(z->pid, SIGSTOP);
            z->paused = true;
        } else {
            z->killed = true;
            ::kill(z->pid, SIGKILL);
        }
        say(std::string(name(f.kind)) + " " + r.target + (pause ? " for " : ", restart in ") +
            seconds(f.hold.count()));
        rec_.faults.push_back(r);
        restores_.spawn(
            restore_zkd(rec_.faults.size() - 1, z->index, z->pid, pause, until), "restore"
        );
        break;
    }
    case fault_kind::zk_kill:
    case fault_kind::zk_pause: {
        if (member_out_ >= 0) {
            skip("zk" + std::to_string(member_out_ + 1) + " is still out");
            co_return;
        }
        const int m = f.target;
        auto probe = [this, m] { return std::make_pair(ensemble_.pid(m), ensemble_.mode(m)); };
        const auto [pid, mode] = co_await reactor::offload(zk_pool_, std::move(probe));
        if (pid <= 0) {
            skip("zk" + std::to_string(m + 1) + " is not running");
            co_return;
        }
        const bool pause = f.kind == fault_kind::zk_pause;
        member_out_ = m;
        r.target = "zk" + std::to_string(m + 1) + " (pid " + std::to_string(pid) + ", " +
                   (mode.empty() ? "not serving" : mode) + ")";
        if (pause) {
            ::kill(pid, SIGSTOP);
        } else {
            auto kill = [this, m] { ensemble_.kill_member(m); };
            co_await reactor::offload(zk_pool_, std::move(kill));
        }
        say(std::string(name(f.kind)) + " " + r.target + (pause ? " for " : ", restart in ") +
            seconds(f.hold.count()));
        rec_.faults.push_back(r);
        restores_.spawn(restore_member(rec_.faults.size() - 1, m, pid, pause, until), "restore");
        break;
    }
    }
}

asio::awaitable<void> chaos_run::restore_zkd(
    std::size_t rec, int slot, pid_t pid, bool pause, clock_type::time_point until
) {
    co_await hold_until(until);
    auto& z = slots_[static_cast<std::size_t>(slot)];
    if (pause) {
        if (z.pid == pid && z.paused) {
            ::kill(pid, SIGCONT);
            z.paused = false;
            say("resumed " + z.name() + " (pid " + std::to_string(pid) + ")");
        }
        co_return;
    }
    // Killed: wait for the reaper, then start a new process in the slot.
    while (z.pid == pid) {
        co_await sleep_until(clock_type::now() + 20ms);
    }
    if (z.pid == 0 && spawn_zkd(z)) {
        say("restarted " + z.name() + " as pid " + std::to_string(z.pid));
    }
    (void)rec;
}

asio::awaitable<void> chaos_run::restore_member(
    std::size_t rec, int member, pid_t pid, bool pause, clock_type::time_point until
) {
    co_await hold_until(until);
    const auto name = "zk" + std::to_string(member + 1);
    if (pause) {
        ::kill(pid, SIGCONT);
        say("resumed " + name);
        const auto limit = clock_type::now() + 120s;
        while (clock_type::now() < limit) {
            auto mode = [this, member] { return ensemble_.mode(member); };
            if (!(co_await reactor::offload(zk_pool_, std::move(mode))).empty()) {
                rec_.faults[rec].served_again_ms = now_ms();
                break;
            }
            co_await sleep_until(clock_type::now() + 100ms);
        }
    } else {
        say("restarting " + name);
        // Which start of the member's log this is, to read its phases at the end of the run.
        rec_.faults[rec].restart_epoch_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch()
        )
                                                .count();
        auto start = [this, member]() -> std::pair<std::string, std::size_t> {
            try {
                ensemble_.start_member(member);
            } catch (const std::exception& e) {
                return {e.what(), 0};
            }
            return {{}, count_starts(read_file(ensemble_.log_path(member)))};
        };
        const auto issued = now_ms();
        const auto [error, starts] = co_await reactor::offload(zk_pool_, std::move(start));
        if (error.empty()) {
            rec_.faults[rec].served_again_ms = now_ms();
            rec_.faults[rec].restart_start = starts;
            rec_.faults[rec].note = "restart took " + seconds(now_ms() - issued);
        } else {
            rec_.faults[rec].note = "restart failed: " + error;
            say(name + " did not restart: " + error);
        }
    }
    if (rec_.faults[rec].served_again_ms) {
        say(name + " serves again, " +
            seconds(*rec_.faults[rec].served_again_ms - rec_.faults[rec].at_ms) +
            " after the fault");
    }
    member_out_ = -1;
}

asio::awaitable<leftover_nodes> chaos_run::scan_leftovers() {
    leftover_nodes out;
    for (const auto& shard : layout_->pending_shard_paths()) {
        if (auto kids = co_await zkco::with_timeout(zk_->get_children(shard), 10s)) {
            out.pending.insert(out.pending.end(), kids->names.begin(), kids->names.end());
        }
    }
    for (std::uint32_t i = 0; i < layout_->pending_shards; ++i) {
        if (auto kids = co_await zkco::with_timeout(
                zk_->get_children(protocol::layout::delayed_shard(i)), 10s
            )) {
            out.delayed.insert(out.delayed.end(), kids->names.begin(), kids->names.end());
        }
    }
    if (auto workers =
            co_await zkco::with_timeout(zk_->get_children(protocol::layout::assign_dir()), 10s)) {
        for (const auto& w : workers->names) {
            if (auto kids = co_await zkco::with_timeout(
                    zk_->get_children(protocol::layout::assign_dir(w)), 10s
                )) {
                for (const auto& k : kids->names) {
                    std::string name = w;
                    name += '/';
                    name += k;
                    out.assigned.push_back(std::move(name));
                }
            }
        }
    }
    // Every directory below /results: the result shards and the clients' directories.
    auto result_dirs = co_await zkco::with_timeout(roles::list_result_dirs(*zk_), 10s);
    for (const auto& dir : result_dirs ? *result_dirs : std::vector<std::string>{}) {
        if (job_clients_.contains(dir.substr(dir.rfind('/') + 1))) {
            continue;  // a schedule's or workflow's results: kept on purpose (jobs checks them)
        }
        if (auto kids = co_await zkco::with_timeout(zk_->get_children(dir), 10s)) {
            for (const auto& id : kids->names) {
                out.results.push_back(id);
                // Who wrote it: the same worker and attempt as the result read means the same
                // run published twice; another attempt, that the task ran twice.
                auto node = co_await zkco::with_timeout(zk_->get(zkco::join_path(dir, id)), 10s);
                if (!node) {
                    continue;
                }
                if (auto res = protocol::decode_result(node->data)) {
                    auto& info = out.result_info[id];
                    info = std::string(protocol::to_string(res->state)) + ", worker " +
                           res->worker + ", attempt " + std::to_string(res->attempt);
                    if (!res->bundle.empty()) {
                        // A bundle's: which of its tasks were published early or consumed.
                        const auto list = [](const std::vector<std::size_t>& v) {
                            std::string s;
                            for (const auto i : v) {
                                s += (s.empty() ? "" : ",") + std::to_string(i);
                            }
                            return "[" + s + "]";
                        };
                        info += ", " + std::to_string(res->bundle.size()) + " tasks, published " +
                                list(res->published) + ", consumed " + list(res->consumed);
                    }
                }
            }
        }
    }
    co_return out;
}

asio::awaitable<void> chaos_run::stop_zkds() {
    for (auto& z : slots_) {
        if (z.pid > 0) {
            if (z.paused) {
                ::kill(z.pid, SIGCONT);
                z.paused = false;
            }
            z.terminated = true;
            ::kill(z.pid, SIGTERM);
        }
    }
    const auto limit = clock_type::now() + stop_limit;
    while (clock_type::now() < limit &&
           std::any_of(slots_.begin(), slots_.end(), [](const auto& z) { return z.pid > 0; })) {
        co_await sleep_until(clock_type::now() + 50ms);
    }
    for (auto& z : slots_) {
        if (z.pid > 0) {
            process_end e;
            e.name = z.name() + "#" + std::to_string(z.starts);
            e.evidence =
                "did not exit within " + std::to_string(stop_limit.count()) + " s of SIGTERM";
            rec_.ends.push_back(e);
            say(e.name + " " + e.evidence + "; killing it");
            ::kill(z.pid, SIGKILL);
            ::waitpid(z.pid, nullptr, 0);
            z.pid = 0;
        }
    }
}

/// "echo at 200 tasks/s, delayed tasks, schedules, workflows": what the run drove.
std::string workload_text(const settings& s) {
    std::string out;
    const auto add = [&out](bool on, const std::string& what) {
        if (on) {
            out += (out.empty() ? "" : ", ") + what;
        }
    };
    char rate[64];
    std::snprintf(rate, sizeof rate, "echo at %.0f tasks/s", s.rate);
    add(s.work.echo, rate);
    add(s.work.delayed, "delayed tasks");
    add(s.work.schedules, "schedules");
    add(s.work.workflows, "workflows");
    return out;
}

std::string text_report(
    const check_report& c,
    const std::optional<jobs_report>& jobs,
    const recording& r,
    std::uint64_t seed,
    const settings& s,
    const fs::path& dir,
    std::uint64_t starts
) {
    std::string out;
    char line[512];
    std::snprintf(
        line, sizeof line,
        "zkd-chaos: seed %llu, %s of %s, a fault every ~%s, %d zkd (session %s), run dir %s\n",
        static_cast<unsigned long long>(seed), seconds(s.duration.count()).c_str(),
        workload_text(s).c_str(), seconds(s.every.count()).c_str(), s.zkd_count,
        seconds(s.session_timeout.count()).c_str(), dir.c_str()
    );
    out += line;
    out += "timeline (recovery: first result of a task submitted after the fault):\n";
    for (const auto& o : c.timeline) {
        std::snprintf(
            line, sizeof line, "  %9s  %-13s  %-34s  %s%s%s\n", seconds(o.f.at_ms).c_str(),
            std::string(name(o.f.planned.kind)).c_str(), o.f.skipped ? "-" : o.f.target.c_str(),
            o.f.skipped     ? ("skipped: " + o.f.note).c_str()
            : o.recovery_ms ? ("recovery " + seconds(*o.recovery_ms)).c_str()
                            : "no later result",
            o.served_after_ms ? (", served again after " + seconds(*o.served_after_ms)).c_str()
                              : "",
            !o.f.skipped && !o.f.note.empty() ? ("; " + o.f.note).c_str() : ""
        );
        out += line;
    }
    std::string kinds;
    std::uint64_t injected = 0;
    for (const auto& [k, n] : c.faults_by_kind) {
        kinds += (kinds.empty() ? "" : ", ") + k + " " + std::to_string(n);
        injected += n;
    }
    std::snprintf(
        line, sizeof line, "faults: %llu injected (%s), %llu skipped\n",
        static_cast<unsigned long long>(injected), kinds.c_str(),
        static_cast<unsigned long long>(c.faults_skipped)
    );
    out += line;
    std::snprintf(
        line, sizeof line,
        "tasks: %llu submitted, %llu results, %llu correct; lost %llu, duplicated %llu, wrong "
        "%llu, "
        "foreign %llu, failed submits %llu; %llu placed on workers directly\n",
        static_cast<unsigned long long>(c.submitted), static_cast<unsigned long long>(c.results),
        static_cast<unsigned long long>(c.correct), static_cast<unsigned long long>(c.lost),
        static_cast<unsigned long long>(c.duplicated), static_cast<unsigned long long>(c.wrong),
        static_cast<unsigned long long>(c.foreign),
        static_cast<unsigned long long>(c.submit_failures),
        static_cast<unsigned long long>(c.placed_directly)
    );
    out += line;
    std::snprintf(
        line, sizeof line, "leftovers: /pending %llu, /delayed %llu, /assign %llu, /results %llu\n",
        static_cast<unsigned long long>(c.leftover_pending),
        static_cast<unsigned long long>(c.leftover_delayed),
        static_cast<unsigned long long>(c.leftover_assigned),
        static_cast<unsigned long long>(c.leftover_results)
    );
    out += line;
    if (jobs) {
        const auto& j = *jobs;
        std::snprintf(
            line, sizeof line,
            "delayed: %llu submitted (%llu failing with 2 retries), %llu as they must be; %llu "
            "early starts, %llu started twice; lateness p50 %lld ms, p99 %lld ms, max %lld ms\n",
            static_cast<unsigned long long>(j.delayed),
            static_cast<unsigned long long>(j.delayed_retried),
            static_cast<unsigned long long>(j.delayed_correct),
            static_cast<unsigned long long>(j.early_starts),
            static_cast<unsigned long long>(j.started_twice),
            static_cast<long long>(j.lateness_p50_ms), static_cast<long long>(j.lateness_p99_ms),
            static_cast<long long>(j.lateness_max_ms)
        );
        out += line;
        for (const auto& l : j.lines) {
            out += "  " + l + "\n";
        }
        std::snprintf(
            line, sizeof line,
            "schedules: %llu due times, %llu firings with a result, %llu missed\n",
            static_cast<unsigned long long>(j.due_times),
            static_cast<unsigned long long>(j.firings), static_cast<unsigned long long>(j.missed)
        );
        out += line;
        std::snprintf(
            line, sizeof line,
            "workflows: %llu submitted, %llu succeeded as expected, %llu task results\n",
            static_cast<unsigned long long>(j.workflows),
            static_cast<unsigned long long>(j.workflows_succeeded),
            static_cast<unsigned long long>(j.workflow_tasks)
        );
        out += line;
    }
    std::snprintf(
        line, sizeof line, "processes: %llu zkd started, %zu ended, %llu crashed\n",
        static_cast<unsigned long long>(starts), r.ends.size(),
        static_cast<unsigned long long>(c.crashes)
    );
    out += line;
    std::snprintf(
        line, sizeof line, "longest stall: %s (from %s)\n", seconds(c.longest_stall_ms).c_str(),
        seconds(c.longest_stall_from_ms).c_str()
    );
    out += line;
    for (const auto& v : c.violations) {
        out += "violation: " + v + "\n";
    }
    out += c.ok() ? "verdict: PASS\n" : "verdict: FAIL\n";
    return out;
}

json::value json_report(
    const check_report& c,
    const std::optional<jobs_report>& jobs,
    std::uint64_t seed,
    const settings& s,
    const fs::path& dir
) {
    json::array timeline;
    for (const auto& o : c.timeline) {
        json::object f{{"at_ms", o.f.at_ms},     {"kind", std::string(name(o.f.planned.kind))},
                       {"target", o.f.target},   {"hold_ms", o.f.planned.hold.count()},
                       {"skipped", o.f.skipped}, {"note", o.f.note}};
        if (o.recovery_ms) {
            f["recovery_ms"] = *o.recovery_ms;
        }
        if (o.served_after_ms) {
            f["served_again_after_ms"] = *o.served_after_ms;
        }
        timeline.push_back(std::move(f));
    }
    json::object kinds;
    for (const auto& [k, n] : c.faults_by_kind) {
        kinds[k] = n;
    }
    json::array violations;
    for (const auto& v : c.violations) {
        violations.emplace_back(v);
    }
    json::object out{
        {"seed", seed},
        {"duration_ms", s.duration.count()},
        {"rate", s.rate},
        {"every_ms", s.every.count()},
        {"zkd_count", s.zkd_count},
        {"run_dir", dir.string()},
        {"submitted", c.submitted},
        {"results", c.results},
        {"correct", c.correct},
        {"lost", c.lost},
        {"duplicated", c.duplicated},
        {"wrong", c.wrong},
        {"foreign", c.foreign},
        {"submit_failures", c.submit_failures},
        {"placed_directly", c.placed_directly},
        {"leftover_pending", c.leftover_pending},
        {"leftover_assigned", c.leftover_assigned},
        {"leftover_results", c.leftover_results},
        {"crashes", c.crashes},
        {"longest_stall_ms", c.longest_stall_ms},
        {"longest_stall_from_ms", c.longest_stall_from_ms},
        {"faults_by_kind", std::move(kinds)},
        {"faults_skipped", c.faults_skipped},
        {"timeline", std::move(timeline)},
        {"violations", std::move(violations)},
        {"verdict", c.ok() ? "pass" : "fail"}};
    out["leftover_delayed"] = c.leftover_delayed;
    if (jobs) {
        const auto& j = *jobs;
        out["jobs"] = json::object{
            {"delayed", j.delayed},
            {"delayed_retried", j.delayed_retried},
            {"delayed_correct", j.delayed_correct},
            {"early_starts", j.early_starts},
            {"started_twice", j.started_twice},
            {"lateness_p50_ms", j.lateness_p50_ms},
            {"lateness_p99_ms", j.lateness_p99_ms},
            {"lateness_max_ms", j.lateness_max_ms},
            {"due_times", j.due_times},
            {"firings", j.firings},
            {"missed", j.missed},
            {"workflows", j.workflows},
            {"workflows_succeeded", j.workflows_succeeded},
            {"workflow_tasks", j.workflow_tasks}};
    }
    return out;
}

asio::awaitable<int> chaos_run::run() {
    const auto chroot = protocol::chroot_path(s_.ns);
    zkco::config cfg;
    cfg.connect_string = connect_ + chroot;
    cfg.session_timeout = client_session_timeout;
    zk_ = std::make_unique<zkco::client>(ioc_.get_executor(), cfg);
    if (auto c = co_await zkco::with_timeout(zk_->connect(), 30s); !c) {
        say("cannot reach ZooKeeper at " + connect_ + ": " + c.error().message());
        co_await zk_->close();
        co_return exit_setup;
    }
    if (zk_->negotiated_timeout() < client_session_timeout) {
        say("the servers granted this tool's session " +
            seconds(zk_->negotiated_timeout().count()) + " (asked " +
            seconds(std::chrono::milliseconds(client_session_timeout).count()) +
            "): a member fault may expire it (raise maxSessionTimeout)");
    }
    if (auto meta = co_await zkco::with_timeout(zk_->exists(protocol::layout::meta()), 10s);
        !meta || meta->has_value()) {
        say(meta ? "namespace " + s_.ns + " is in use (" + chroot +
                       "/meta exists): pick another --namespace"
                 : "reading " + chroot + "/meta: " + meta.error().message());
        co_await zk_->close();
        co_return exit_setup;
    }
    if (!ip_.empty() && !set_up_netns()) {
        tear_down_netns();
        co_await zk_->close();
        co_return exit_setup;
    }
    if (s_.work.jobs() && !write_step_program()) {
        tear_down_netns();
        co_await zk_->close();
        co_return exit_setup;
    }
    aux_.spawn(reap(), "reap");
    for (auto& z : slots_) {
        if (!spawn_zkd(z)) {
            co_await abandon();
            co_return exit_setup;
        }
    }
    say("started " + std::to_string(slots_.size()) + " zkd (" + zkd_ +
        "); waiting for the workers and a master");
    if (!co_await wait_ready(120s)) {
        say("the cluster did not come up within 120 s (see the zkd logs in " + dir_.string() + ")");
        co_await abandon();
        co_return exit_setup;
    }
    say("the cluster is up: " + std::to_string(slots_.size()) + " workers and a master");
    auto l = co_await roles::read_layout(*zk_);
    if (!l) {
        say("reading the cluster's layout: " + l.error().message());
        co_await abandon();
        co_return exit_setup;
    }
    layout_ = *l;
    client_ = std::make_unique<roles::task_client>(*zk_, *layout_);
    static_assert(default_auto_bundle == roles::task_client::default_auto_bundle);
    client_->auto_bundle(s_.auto_bundle);

    std::vector<fault> plan;
    if (!s_.kinds.empty()) {
        schedule_params p;
        p.seed = seed_;
        p.duration = s_.duration;
        p.every = s_.every;
        p.kinds = s_.kinds;
        p.zkd_count = s_.zkd_count;
        p.zk_count = ensemble_.size() >= 3 ? ensemble_.size() : 0;
        p.pause_max = s_.pause_max;
        try {
            plan = make_schedule(p);
        } catch (const std::invalid_argument& e) {
            say(std::string("no faults: ") + e.what());
        }
    }
    start_ = clock_type::now();
    say("load: " + workload_text(s_) + " for " + seconds(s_.duration.count()) + "; " +
        std::to_string(plan.size()) + " faults planned");
    aux_.spawn(faults(std::move(plan)), "faults");
    if (s_.work.schedules) {
        co_await add_schedules();
        aux_.spawn(schedule_poller(), "schedules");
    }
    if (s_.work.delayed) {
        loads_.spawn(delayed_load(), "delayed load");
    }
    if (s_.work.workflows) {
        loads_.spawn(workflow_load(), "workflow load");
    }
    if (s_.work.echo) {
        co_await load();
    } else {
        while (!stop_load_ && clock_type::now() < start_ + s_.duration) {
            co_await sleep_until(std::min(start_ + s_.duration, clock_type::now() + 100ms));
        }
    }

    // Stop the faults, bring everything back, wait for the last results.
    faults_stopped_ = true;
    co_await restores_.join();
    const auto settle_until = clock_type::now() + s_.settle;
    if (s_.work.jobs()) {
        co_await finish_jobs(settle_until);
    }
    jobs_stopped_ = true;
    // Until every result came and was consumed: the leftovers are looked for next.
    while ((outstanding_ > 0 || delayed_outstanding_ > 0 || consuming_ > 0) &&
           clock_type::now() < settle_until) {
        co_await sleep_until(clock_type::now() + 50ms);
    }
    rec_.end_ms = now_ms();
    rec_.placed_directly = client_->direct_placed();
    if (outstanding_ + delayed_outstanding_ > 0) {
        say(std::to_string(outstanding_ + delayed_outstanding_) +
            " tasks still without a result after settling for " + seconds(s_.settle.count()));
    }
    if (consuming_ > 0) {
        say(std::to_string(consuming_) + " consumes still unanswered after settling for " +
            seconds(s_.settle.count()) + ": their results may be left behind");
    }
    loads_.emit(asio::cancellation_type::terminal);
    try {
        co_await loads_.join();
    } catch (const std::exception& e) {
        say(std::string("the load failed: ") + e.what());
    }
    co_await client_->flush();
    // The master and workers may still be cleaning up (a requeue, a late T4): look again
    // until the namespace is clean or 15 s passed.
    const auto scan_until = clock_type::now() + 15s;
    for (;;) {
        rec_.leftovers = co_await scan_leftovers();
        const auto& lo = rec_.leftovers;
        if ((lo.pending.empty() && lo.delayed.empty() && lo.assigned.empty() && lo.results.empty()
            ) ||
            clock_type::now() > scan_until) {
            break;
        }
        co_await sleep_until(clock_type::now() + 250ms);
    }
    co_await stop_zkds();
    reaping_ = false;
    tear_down_netns();
    // Where each member restart spent its time, from the member's own log (complete now).
    for (auto& f : rec_.faults) {
        if (f.restart_start > 0) {
            const int m = f.planned.target;
            auto read = [this, m] { return read_file(ensemble_.log_path(m)); };
            const auto log = co_await reactor::offload(zk_pool_, std::move(read));
            f.note += ": " + describe(parse_restart(log, f.restart_epoch_ms, f.restart_start));
        }
    }
    try {
        co_await aux_.join();
    } catch (const std::exception& e) {
        say(std::string("internal: ") + e.what());
    }
    client_.reset();
    co_await zk_->close();

    auto report = check(rec_);
    std::optional<jobs_report> jobs;
    if (s_.work.jobs()) {
        jobs_.leftover_results = rec_.leftovers.results;
        auto read = [this] { return read_file(start_log_); };
        const auto log = co_await reactor::offload(zk_pool_, std::move(read));
        jobs_.starts = parse_start_log(log, &jobs_.bad_start_lines);
        jobs = check_jobs(jobs_);
        report.violations.insert(
            report.violations.end(), jobs->violations.begin(), jobs->violations.end()
        );
    }
    const auto text = text_report(report, jobs, rec_, seed_, s_, dir_, starts_);
    if (s_.json) {
        std::fputs(text.c_str(), stderr);
        std::printf(
            "%s\n", zkd::protocol::to_text(json_report(report, jobs, seed_, s_, dir_)).c_str()
        );
    } else {
        std::fputs(text.c_str(), stdout);
    }
    co_return report.ok() ? exit_ok : exit_violation;
}

}  // namespace
}  // namespace zkd::chaos

int main(int argc, char** argv) {
    using namespace zkd::chaos;
    // A closed stdout or stderr (`| head`) must not kill the run before it cleans up.
    std::signal(SIGPIPE, SIG_IGN);  // NOLINT(cert-err33-c): cannot fail for SIGPIPE
    // The libraries' warnings (a session reconnecting) go to stderr: stdout holds the report.
    spdlog::set_default_logger(spdlog::stderr_logger_mt("zkd-chaos"));
    spdlog::set_level(spdlog::level::warn);
    if (argc == 2 && std::string_view(argv[1]) == "--version") {
        std::printf("zkd-chaos %s\n", ZKD_VERSION);
        return exit_ok;
    }
    parsed_args parsed;
    try {
        parsed = parse_args(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const usage_error& e) {
        std::fprintf(stderr, "zkd-chaos: %s\n(see 'zkd-chaos --help')\n", e.what());
        return exit_usage;
    }
    if (parsed.help) {
        std::fputs(help_text(), stdout);
        return exit_ok;
    }
    const settings s = parsed.s;
    const std::uint64_t seed =
        s.seed.value_or(std::random_device{}() * 0x100000000ULL + std::random_device{}());
    const char* brk =
        std::getenv("ZKD_CHAOS_BREAK");  // NOLINT(concurrency-mt-unsafe): no threads yet
    const bool break_result = brk != nullptr && std::string(brk) == "drop-result";

    const std::string zkd = find_zkd(s.zkd_binary);
    if (zkd.empty() || ::access(zkd.c_str(), X_OK) != 0) {
        std::fprintf(
            stderr, "zkd-chaos: no zkd program found%s: give --zkd PATH\n",
            zkd.empty() ? "" : (" at " + zkd).c_str()
        );
        return exit_usage;
    }
    std::string ip_program;
    if (s.partitions) {
        ip_program = find_ip();
        if (::geteuid() != 0 || ip_program.empty()) {
            std::fprintf(
                stderr, "zkd-chaos: --partitions needs root and the ip program (iproute2)\n"
            );
            return exit_usage;
        }
    }
    if (s.work.jobs() && s.dir.find_first_of(" \t") != std::string::npos) {
        std::fprintf(
            stderr,
            "zkd-chaos: the jobs workloads need a run directory without spaces (its step "
            "program's path makes an exec type's command line)\n"
        );
        return exit_usage;
    }
    fs::path dir = s.dir;
    std::error_code ec;
    if (dir.empty()) {
        std::string tmpl = (fs::temp_directory_path() / "zkd-chaos-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            std::fprintf(stderr, "zkd-chaos: mkdtemp: %s\n", std::strerror(errno));
            return exit_setup;
        }
        dir = tmpl;
    } else if (fs::create_directories(dir, ec); ec) {
        std::fprintf(
            stderr, "zkd-chaos: cannot create %s: %s\n", dir.c_str(), ec.message().c_str()
        );
        return exit_setup;
    }
    std::fprintf(
        stderr, "zkd-chaos: seed %llu, run directory %s\n", static_cast<unsigned long long>(seed),
        dir.c_str()
    );

    std::optional<zkd::zk_local::cluster> ensemble;
    try {
        if (!s.zk_dir.empty()) {
            ensemble.emplace(zkd::zk_local::cluster::attach(s.zk_dir));
        } else {
            std::string why;
            if (!zkd::zk_local::java_and_server_available(&why)) {
                std::fprintf(stderr, "zkd-chaos: cannot start ZooKeeper: %s\n", why.c_str());
                return exit_setup;
            }
            zkd::zk_local::options o;
            o.servers = 3;
            o.dir = dir / "zk";
            o.start_timeout = std::chrono::seconds(120);
            // ZooKeeper's own cap is 20 ticks (4 s at 200 ms): the tool's session must outlast
            // a member's pause or restart, so allow what zkd-zk-local allows.
            o.extra_config.emplace_back("maxSessionTimeout=60000");
            if (s.partitions) {
                // The zkds reach the servers from their namespaces, over the veth links.
                o.extra_config.emplace_back("clientPortAddress=0.0.0.0");
            }
            std::fprintf(stderr, "zkd-chaos: starting 3 ZooKeeper servers in %s\n", o.dir.c_str());
            ensemble.emplace(zkd::zk_local::cluster::start(o));
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zkd-chaos: ZooKeeper: %s\n", e.what());
        return exit_setup;
    }

    asio::io_context ioc(1);
    int rc = exit_setup;
    {
        chaos_run run(ioc, s, seed, dir, *ensemble, zkd, break_result, ip_program);
        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        int interrupts = 0;
        std::function<void()> arm = [&] {
            signals.async_wait([&](const boost::system::error_code& e, int) {
                if (e) {
                    return;
                }
                if (++interrupts > 1) {
                    // Our children (zkd and, unless attached, the JVMs) die with us.
                    std::_Exit(exit_violation);
                }
                std::fprintf(
                    stderr,
                    "zkd-chaos: interrupted: stopping the load, then checking "
                    "(again to quit at once)\n"
                );
                run.interrupt();
                arm();
            });
        };
        arm();
        asio::co_spawn(ioc, run.run(), [&](const std::exception_ptr& e, int code) {
            rc = code;
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    std::fprintf(stderr, "zkd-chaos: unexpected: %s\n", ex.what());
                    rc = exit_setup;
                }
            }
            signals.cancel();
        });
        ioc.run();
    }
    if (s.zk_dir.empty()) {
        ensemble->stop(true);  // the run dir keeps the servers' logs
    }
    ensemble.reset();
    if (rc == exit_ok && s.clean_on_pass) {
        fs::remove_all(dir, ec);
    } else {
        std::fprintf(stderr, "zkd-chaos: logs and data are in %s\n", dir.c_str());
    }
    return rc;
}
