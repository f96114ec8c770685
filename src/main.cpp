// SPDX-License-Identifier: MIT
// zkd: one binary. `zkd run` joins a cluster (worker, candidate master or both); `zkd submit`
// submits a task and, with --wait, prints its result.
#include "reactor/compute_pool.hpp"
#include "reactor/event.hpp"
#include "reactor/signals.hpp"
#include "roles/builtin_handlers.hpp"
#include "roles/election.hpp"
#include "roles/layout.hpp"
#include "roles/node.hpp"
#include "roles/registry.hpp"
#include "roles/task_client.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// Exit codes, for scripts.
constexpr int exit_ok = 0;
constexpr int exit_failed = 1;        // the task did not succeed / the node stopped on an error
constexpr int exit_usage = 2;         // bad command line
constexpr int exit_unreachable = 3;   // ZooKeeper could not be reached in time
constexpr int exit_timeout = 4;       // --wait gave up

constexpr const char* main_help = R"(usage: zkd <command> [options]

commands:
  run      join a cluster: work and run for master (auto-elected)
  submit   submit a task; with --wait, wait for and print its result

Run 'zkd <command> --help' for a command's options. Every command takes
--zk CONNECT (env ZKD_ZK, default 127.0.0.1:2181; hosts with an optional /path) and
--namespace NS (env ZKD_NAMESPACE, default "default"); the cluster lives in <path>/zkd/<NS>.
Exit codes: 0 ok, 1 failed, 2 usage error, 3 ZooKeeper unreachable, 4 timed out.
)";

constexpr const char* run_help = R"(usage: zkd run [options]

Joins the cluster in /zkd/<NS>: runs tasks on a compute pool and runs for master; the
elected master assigns tasks. On SIGINT/SIGTERM it drains: takes no new tasks, lets the
running ones finish (up to --grace; what is still running then goes back to the queue) and
leaves the cluster. A second signal exits at once. Durations take a unit: 500ms, 30s, 5m,
24h (a bare number is milliseconds).

  --zk CONNECT            ZooKeeper hosts[/path] (env ZKD_ZK; default 127.0.0.1:2181)
  --namespace NS          cluster namespace (env ZKD_NAMESPACE; default "default")
  --capacity N            task slots (default: number of cores; 0: never work)
  --threads N             compute pool threads (default: number of cores)
  --role ROLE             auto (default), worker (never master), standby (never work)
  --session-timeout DUR   ZooKeeper session timeout (default 10s)
  --grace DUR             on SIGTERM, how long running tasks may take to finish (default 30s)
  --user NAME             digest credentials (env ZKD_USER): everything zkd creates is then
  --password SECRET         readable and writable only with the same credentials (env
                            ZKD_PASSWORD; prefer it or --password-file: flags show in ps)
  --password-file FILE    read the password from FILE (first line)
  --placement POLICY      when master: least-loaded (default), round-robin, random
  --result-retention DUR  when master: delete results nobody consumed after DUR (default 24h)
  --host NAME             name in member ids (default: the hostname)
  --log-level LEVEL       trace, debug, info (default), warn, error
  --enable-crash-task     serve the `crash` task type, which aborts this process (for
                          testing poison-task handling; off by default)
)";

constexpr const char* submit_help = R"(usage: zkd submit TYPE [ARGS-JSON] [options]

Submits one task of a registered TYPE (built in: echo, sum, sleep, spin, fail, md5-crack;
crash where workers run with --enable-crash-task) with JSON arguments (default null). Prints the task id, or with --wait the
result as JSON; exits 0 only if the task succeeded.

  --zk CONNECT            ZooKeeper hosts (env ZKD_ZK; default 127.0.0.1:2181)
  --namespace NS          cluster namespace (env ZKD_NAMESPACE; default "default")
  --wait                  wait for the result and print it
  --timeout MS            with --wait: give up after MS (exit 4); default: wait forever
  --priority P            0 (lowest) to 9 (highest), default 5
  --task-timeout MS       the handler's time limit (default none)
  --max-attempts N        runs allowed if workers die (default 3)
  --connect-timeout MS    give up reaching ZooKeeper after MS (exit 3; default 10000)
  --user, --password, --password-file   digest credentials, as for 'zkd run'
)";

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Flags of one command: `--name value` or `--name` (switches), and positionals.
struct args {
    std::map<std::string, std::string> flags;
    std::vector<std::string> positional;

    static args parse(int argc, char** argv, int first, const std::vector<std::string>& switches,
                      const std::vector<std::string>& valued) {
        args a;
        for (int i = first; i < argc; ++i) {
            std::string s = argv[i];
            if (s.rfind("--", 0) != 0 || s == "--") {
                a.positional.push_back(std::move(s));
                continue;
            }
            std::string value;
            if (const auto eq = s.find('='); eq != std::string::npos) {
                value = s.substr(eq + 1);
                s.resize(eq);
            } else if (std::find(valued.begin(), valued.end(), s) != valued.end()) {
                if (i + 1 >= argc) {
                    throw usage_error(s + " needs a value");
                }
                value = argv[++i];
            }
            const bool known = std::find(switches.begin(), switches.end(), s) != switches.end() ||
                               std::find(valued.begin(), valued.end(), s) != valued.end();
            if (!known) {
                throw usage_error("unknown option " + s);
            }
            a.flags[s] = value;
        }
        return a;
    }

    [[nodiscard]] bool has(const std::string& k) const { return flags.contains(k); }

    [[nodiscard]] std::string get(const std::string& k, const char* env, std::string def) const {
        if (auto it = flags.find(k); it != flags.end()) {
            return it->second;
        }
        if (env != nullptr) {
            if (const char* v = std::getenv(env)) {  // NOLINT(concurrency-mt-unsafe)
                return v;
            }
        }
        return def;
    }

    /// A duration flag: a whole number with a unit (ms, s, m, h); a bare number is ms.
    [[nodiscard]] std::chrono::milliseconds duration(const std::string& k, std::chrono::milliseconds def,
                                                     std::chrono::milliseconds min,
                                                     std::chrono::milliseconds max) const {
        auto it = flags.find(k);
        if (it == flags.end()) {
            return def;
        }
        const std::string& text = it->second;
        std::size_t used = 0;
        long long n = -1;
        try {
            n = std::stoll(text, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        const std::string unit = text.substr(used);
        long long scale = 0;
        if (unit.empty() || unit == "ms") {
            scale = 1;
        } else if (unit == "s") {
            scale = 1000;
        } else if (unit == "m") {
            scale = 60'000;
        } else if (unit == "h") {
            scale = 3'600'000;
        }
        if (used == 0 || n < 0 || scale == 0 || n > max.count() / scale ||
            n * scale < min.count() || n * scale > max.count()) {
            throw usage_error(k + " wants a duration from " + std::to_string(min.count()) + "ms to " +
                              std::to_string(max.count() / 1000) + "s (e.g. 500ms, 30s, 5m, 2h), not '" +
                              text + "'");
        }
        return std::chrono::milliseconds(n * scale);
    }

    [[nodiscard]] long number(const std::string& k, long def, long min, long max) const {
        auto it = flags.find(k);
        if (it == flags.end()) {
            return def;
        }
        try {
            std::size_t used = 0;
            const long v = std::stol(it->second, &used);
            if (used != it->second.size() || v < min || v > max) {
                throw std::out_of_range(it->second);
            }
            return v;
        } catch (const std::exception&) {
            throw usage_error(k + " wants a whole number from " + std::to_string(min) + " to " +
                              std::to_string(max) + ", not '" + it->second + "'");
        }
    }
};

const std::vector<std::string> common_valued{"--zk", "--namespace", "--user", "--password",
                                             "--password-file"};

std::vector<std::string> with_common(std::vector<std::string> v) {
    v.insert(v.end(), common_valued.begin(), common_valued.end());
    return v;
}

std::string validated_connect(const args& a) {
    auto zk = a.get("--zk", "ZKD_ZK", "127.0.0.1:2181");
    if (!zkd::zkco::parse_connect_string(zk)) {
        throw usage_error("--zk wants host:port[,host:port...][/path], not '" + zk + "'");
    }
    return zk;
}

/// Digest credentials from --user and --password / --password-file (or ZKD_USER and
/// ZKD_PASSWORD); none when no user is given.
std::optional<zkd::zkco::credentials> credentials(const args& a) {
    const auto user = a.get("--user", "ZKD_USER", "");
    std::string password = a.get("--password", "ZKD_PASSWORD", "");
    if (a.has("--password-file")) {
        std::ifstream in(a.flags.at("--password-file"));
        if (!in) {
            throw usage_error("cannot read --password-file '" + a.flags.at("--password-file") + "'");
        }
        std::getline(in, password);
    }
    if (user.empty()) {
        if (a.has("--password") || a.has("--password-file")) {
            throw usage_error("a password needs --user (or ZKD_USER)");
        }
        return std::nullopt;
    }
    if (user.find(':') != std::string::npos) {
        throw usage_error("--user must not contain ':'");
    }
    if (password.empty()) {
        throw usage_error("--user needs a password (--password, --password-file or ZKD_PASSWORD)");
    }
    return zkd::zkco::credentials{user, password};
}

std::string validated_namespace(const args& a) {
    auto ns = a.get("--namespace", "ZKD_NAMESPACE", "default");
    if (ns.empty() || ns.find('/') != std::string::npos || ns == "." || ns == "..") {
        throw usage_error("--namespace wants a name without '/', not '" + ns + "'");
    }
    return ns;
}

int cmd_run(int argc, char** argv) {
    const auto a = args::parse(argc, argv, 2, {"--help", "--enable-crash-task"},
                               with_common({"--capacity", "--threads", "--role", "--session-timeout",
                                            "--placement", "--host", "--log-level", "--grace",
                                            "--result-retention"}));
    if (a.has("--help")) {
        std::fputs(run_help, stdout);
        return exit_ok;
    }
    if (!a.positional.empty()) {
        throw usage_error("unexpected argument '" + a.positional.front() + "'");
    }
    const long cores = std::max(1U, std::thread::hardware_concurrency());
    zkd::roles::node_options o;
    o.zk = validated_connect(a);
    o.ns = validated_namespace(a);
    o.capacity = static_cast<int>(a.number("--capacity", cores, 0, 100'000));
    o.session_timeout = a.duration("--session-timeout", 10s, 400ms, 1h);
    o.auth = credentials(a);
    o.master.result_retention = a.duration("--result-retention", 24h, 1s, 24h * 365);
    const auto grace = a.duration("--grace", 30s, 0ms, 24h);
    o.host = a.get("--host", nullptr, "");
    const auto role = a.get("--role", nullptr, "auto");
    if (role == "auto") {
        o.role = zkd::roles::node_role::automatic;
    } else if (role == "worker") {
        o.role = zkd::roles::node_role::worker_only;
    } else if (role == "standby") {
        o.role = zkd::roles::node_role::standby;
    } else {
        throw usage_error("--role wants auto, worker or standby, not '" + role + "'");
    }
    const auto policy = zkd::roles::parse_placement_policy(a.get("--placement", nullptr, "least-loaded"));
    if (!policy) {
        throw usage_error("--placement wants least-loaded, round-robin or random");
    }
    o.master.policy = *policy;
    const auto level = spdlog::level::from_str(a.get("--log-level", nullptr, "info"));
    if (level == spdlog::level::off && a.get("--log-level", nullptr, "info") != "off") {
        throw usage_error("--log-level wants trace, debug, info, warn, error or off");
    }
    spdlog::set_level(level);

    zkd::roles::registry reg;
    zkd::roles::add_builtin_handlers(reg, a.has("--enable-crash-task"));
    zkd::reactor::compute_pool pool(static_cast<std::size_t>(a.number("--threads", cores, 1, 1024)));
    asio::io_context ioc(1);
    asio::cancellation_signal stop;
    zkd::reactor::event drain(ioc.get_executor());
    zkd::roles::node_stats stats;
    int rc = exit_ok;
    zkd::reactor::shutdown_handlers handlers;
    handlers.on_graceful = [&](int signo) {
        spdlog::info("zkd: signal {}: draining: no new tasks, {} s for the running ones to finish "
                     "(signal again to exit at once)",
                     signo, std::chrono::duration_cast<std::chrono::seconds>(grace).count());
        drain.set();
    };
    handlers.on_grace_expired = [&] {
        spdlog::warn("zkd: grace period over: stopping the tasks still running (they go back to "
                     "the queue)");
        stop.emit(asio::cancellation_type::terminal);
    };
    zkd::reactor::shutdown_controller signals(ioc.get_executor(), grace, std::move(handlers));
    zkd::roles::node_links links{&stats, &drain};
    asio::co_spawn(ioc, zkd::roles::run_node(o, reg, pool, links),
                   asio::bind_cancellation_slot(stop.slot(), [&](const std::exception_ptr& e) {
                       if (e) {
                           try {
                               std::rethrow_exception(e);
                           } catch (const std::exception& ex) {
                               spdlog::error("zkd: stopped on an error: {}", ex.what());
                           }
                           rc = exit_failed;
                       }
                       signals.stop();
                   }));
    ioc.run();
    return rc;
}

int cmd_submit(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2, {"--help", "--wait"},
        with_common({"--timeout", "--priority", "--task-timeout", "--max-attempts", "--connect-timeout"}));
    if (a.has("--help")) {
        std::fputs(submit_help, stdout);
        return exit_ok;
    }
    if (a.positional.empty() || a.positional.size() > 2) {
        throw usage_error("submit wants TYPE [ARGS-JSON]");
    }
    zkd::roles::task_request req;
    req.type = a.positional[0];
    if (!zkd::roles::is_valid_type_name(req.type)) {
        throw usage_error("'" + req.type + "' is not a valid task type name");
    }
    if (a.positional.size() == 2) {
        boost::system::error_code ec;
        req.args = json::parse(a.positional[1], ec);
        if (ec) {
            throw usage_error("ARGS-JSON is not JSON: " + ec.message());
        }
    }
    req.priority = static_cast<int>(a.number("--priority", 5, 0, 9));
    req.timeout = std::chrono::milliseconds(a.number("--task-timeout", 0, 0, 86'400'000));
    req.max_attempts = static_cast<int>(a.number("--max-attempts", 3, 1, 1000));
    const bool wait = a.has("--wait");
    const auto wait_timeout = std::chrono::milliseconds(a.number("--timeout", 0, 0, 86'400'000 * 365L));
    const auto connect_timeout = std::chrono::milliseconds(a.number("--connect-timeout", 10'000, 1, 3'600'000));
    const auto zk_hosts = validated_connect(a);
    const auto chroot = zkd::roles::chroot_path(validated_namespace(a));
    const auto auth = credentials(a);
    spdlog::set_level(spdlog::level::warn);

    asio::io_context ioc(1);
    int rc = exit_failed;
    auto body = [&]() -> asio::awaitable<void> {
        zkd::zkco::config cfg;
        cfg.connect_string = zk_hosts + chroot;
        cfg.session_timeout = 10s;
        cfg.auth = auth;
        zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
        auto c = co_await zkd::zkco::with_timeout(zk.connect(), connect_timeout);
        if (!c) {
            std::fprintf(stderr, "zkd: cannot reach ZooKeeper at %s within %lld ms: %s\n",
                         zk_hosts.c_str(), static_cast<long long>(connect_timeout.count()),
                         c.error().message().c_str());
            rc = exit_unreachable;
            co_return;
        }
        auto l = co_await zkd::roles::ensure_layout(zk, zkd::roles::meta_info{});
        if (!l) {
            std::fprintf(stderr, "zkd: no usable cluster in %s: %s\n", chroot.c_str(),
                         l.error().message().c_str());
            co_await zk.close();
            co_return;
        }
        zkd::roles::task_client tc(zk, *l);
        std::vector<zkd::roles::task_request> one{std::move(req)};
        auto ids = co_await tc.submit(std::move(one));
        if (!ids) {
            std::fprintf(stderr, "zkd: submit failed: %s\n", ids.error().message().c_str());
            co_await zk.close();
            co_return;
        }
        const auto& id = ids->front();
        if (!wait) {
            std::printf("%s\n", id.c_str());
            rc = exit_ok;
            co_await zk.close();
            co_return;
        }
        // Separate statements: GCC 12 miscompiles co_await inside ?: and && / ||.
        zkd::zkco::result<zkd::roles::task_result> result =
            zkd::zkco::error_code(zkd::zkco::errc::operation_timeout);
        if (wait_timeout.count() > 0) {
            result = co_await zkd::zkco::with_timeout(tc.wait(id), wait_timeout);
        } else {
            result = co_await tc.wait(id);
        }
        if (!result) {
            const bool timed_out = result.error() == zkd::zkco::errc::operation_timeout;
            std::fprintf(stderr, "zkd: task %s: %s\n", id.c_str(),
                         timed_out ? "no result in time (it may still run)"
                                   : result.error().message().c_str());
            rc = timed_out ? exit_timeout : exit_failed;
            co_await zk.close();
            co_return;
        }
        std::printf("%s\n", zkd::roles::encode(*result).c_str());
        rc = result->state == zkd::roles::task_state::succeeded ? exit_ok : exit_failed;
        co_await zk.close();
    };
    asio::co_spawn(ioc, body(), [&](const std::exception_ptr& e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::fprintf(stderr, "zkd: %s\n", ex.what());
            }
            rc = exit_failed;
        }
    });
    ioc.run();
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    spdlog::cfg::load_env_levels();
    const std::string cmd = argc > 1 ? argv[1] : "";
    try {
        if (cmd == "run") {
            return cmd_run(argc, argv);
        }
        if (cmd == "submit") {
            return cmd_submit(argc, argv);
        }
        if (cmd == "--help" || cmd == "-h" || cmd == "help") {
            std::fputs(main_help, stdout);
            return exit_ok;
        }
        throw usage_error(cmd.empty() ? "a command is needed" : "unknown command '" + cmd + "'");
    } catch (const usage_error& e) {
        std::fprintf(stderr, "zkd: %s\n(see 'zkd --help')\n", e.what());
        return exit_usage;
    }
}
