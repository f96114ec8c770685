// SPDX-License-Identifier: MIT
// zkd run: one cluster member (worker, candidate master, or both), until a signal drains it.
#include "cli/commands.hpp"
#include "cli/logging.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "http/server.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/event.hpp"
#include "reactor/lag_probe.hpp"
#include "reactor/signals.hpp"
#include "roles/builtin_handlers.hpp"
#include "roles/exec.hpp"
#include "roles/node.hpp"
#include "roles/placement.hpp"
#include "roles/registry.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace zkd::cli {

namespace {

constexpr const char* run_help = R"(usage: zkd run [options]

Joins the cluster in /zkd/<NS>: runs tasks on a compute pool and runs for master; the
elected master assigns tasks. On SIGINT/SIGTERM it drains: takes no new tasks, lets the
running ones finish (up to --grace; what is still running then goes back to the queue) and
leaves the cluster. A second signal exits at once. Exit code 0 after a clean leave, 1 if it
stopped on an error.

Every option can also be set by environment (--session-timeout: ZKD_SESSION_TIMEOUT) or in a
config file (--config FILE or ZKD_CONFIG; lines 'session-timeout = 5s'); the command line
wins, then the environment, then the file. Durations take a unit: 500ms, 30s, 5m, 24h (a
bare number is milliseconds).

  --zk CONNECT            ZooKeeper hosts[/path] (default 127.0.0.1:2181)
  --namespace NS          cluster namespace (default "default")
  --capacity N            task slots (default: number of cores; 0: never work)
  --threads N             compute pool threads (default: number of cores)
  --role ROLE             auto (default), worker (never master), standby (never work)
  --session-timeout DUR   ZooKeeper session timeout (default 10s)
  --grace DUR             on SIGTERM, how long running tasks may take to finish (default 30s)
  --user NAME             digest credentials: everything zkd creates is then readable and
  --password SECRET         writable only with the same credentials (prefer ZKD_PASSWORD or
  --password-file FILE      --password-file: flags show in ps)
  --placement POLICY      when master: least-loaded (default), round-robin, random
  --result-retention DUR  when master: delete results nobody consumed after DUR (default 24h)
  --host NAME             name in member ids (default: the hostname)
  --log-level LEVEL       trace, debug, info (default), warn, error, off
  --log-format FORMAT     text (default) or json (one object per line)
  --http ADDR             serve the HTTP API and /metrics on ADDR (host:port, [v6]:port, or
                          :port for loopback; off by default; see README "HTTP API")
  --enable-crash-task     serve the `crash` task type, which aborts this process (for
                          testing poison-task handling; off by default)
  --exec NAME=PROGRAM [ARG...]
                          serve task type NAME by running PROGRAM (args JSON on stdin, result
                          on stdout; no shell: the value is split on spaces); repeatable.
                          Per-type settings (timeout, max-output, concurrency, output, env,
                          dir, user, kill-grace) go in the config file as 'exec.NAME.SETTING
                          = VALUE', and 'exec.NAME = PROGRAM [ARG...]' defines one there:
                          see docs/exec.md
  --config FILE           read options from FILE
)";

}  // namespace

namespace {

/// The exec types of --exec and the config file's `exec.*` lines, checked: a missing or
/// non-executable program is a usage error naming the type.
void add_exec_types(const args& a, roles::registry& reg) {
    std::map<std::string, roles::exec::program_config> types;
    try {
        for (const auto& [key, value] : a.exec_settings()) {
            roles::exec::apply_setting(types, key, value);
        }
        for (const auto& flag : a.values("--exec")) {
            auto c = roles::exec::parse_exec_flag(flag);
            auto& t = types[c.name];
            t.name = c.name;
            t.argv = std::move(c.argv);  // the command line wins over the file's program
        }
        const auto lookup = [](const std::string& name) -> std::optional<std::string> {
            const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
            return v == nullptr ? std::nullopt : std::optional<std::string>(v);
        };
        for (auto& [name, c] : types) {
            if (reg.find(name) != nullptr || reg.find_async(name) != nullptr) {
                throw usage_error("exec type '" + name + "': a built-in task type has that name");
            }
            auto p = roles::exec::resolve(std::move(c), lookup);
            spdlog::debug("zkd: exec type {}: {}", name, p.path);
            roles::exec::add_exec_type(reg, std::move(p));
        }
    } catch (const std::invalid_argument& e) {
        throw usage_error(e.what());
    }
}

}  // namespace

int cmd_run(int argc, char** argv) {
    const auto a = args::parse(argc, argv, 2,
                               cluster_options({{"--capacity"}, {"--threads"}, {"--role"},
                                                {"--session-timeout"}, {"--placement"}, {"--host"},
                                                {"--log-level"}, {"--log-format"}, {"--grace"},
                                                {"--result-retention"}, {"--http"},
                                                {"--enable-crash-task", false, true},
                                                {"--exec", true, false, true}}));
    if (a.has("--help")) {
        std::fputs(run_help, stdout);
        return exit_ok;
    }
    if (!a.positional.empty()) {
        throw usage_error("unexpected argument '" + a.positional.front() + "'");
    }
    const long cores = std::max(1U, std::thread::hardware_concurrency());
    const auto target = target_of(a);
    roles::node_options o;
    o.zk = target.hosts;
    o.ns = target.ns;
    o.auth = target.auth;
    o.capacity = static_cast<int>(a.number("--capacity", cores, 0, 100'000));
    o.session_timeout = a.duration("--session-timeout", 10s, 400ms, 1h);
    o.master.result_retention = a.duration("--result-retention", 24h, 1s, 24h * 365);
    const auto grace = a.duration("--grace", 30s, 0ms, 24h);
    o.host = a.get("--host", "");
    const auto role = a.get("--role", "auto");
    if (role == "auto") {
        o.role = roles::node_role::automatic;
    } else if (role == "worker") {
        o.role = roles::node_role::worker_only;
    } else if (role == "standby") {
        o.role = roles::node_role::standby;
    } else {
        throw usage_error("--role wants auto, worker or standby, not '" + role + "'");
    }
    const auto policy = roles::parse_placement_policy(a.get("--placement", "least-loaded"));
    if (!policy) {
        throw usage_error("--placement wants least-loaded, round-robin or random");
    }
    o.master.policy = *policy;
    const auto threads = static_cast<std::size_t>(a.number("--threads", cores, 1, 1024));
    setup_logging(a.get("--log-level", "info"), a.get("--log-format", "text"));

    roles::registry reg;
    roles::add_builtin_handlers(reg, a.has("--enable-crash-task"));
    add_exec_types(a, reg);
    reactor::compute_pool pool(threads);
    asio::io_context ioc(1);
    asio::cancellation_signal stop;
    reactor::event drain(ioc.get_executor());
    roles::node_stats stats;
    int rc = exit_ok;
    reactor::shutdown_handlers handlers;
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
    // The HTTP facade, when asked for: bound before joining, so a taken port fails fast.
    std::optional<http::server> web;
    reactor::lag_probe lag(ioc.get_executor());
    asio::cancellation_signal web_stop;
    if (const auto listen = a.value("--http")) {
        http::server_options ho;
        ho.listen = *listen;
        ho.zk = target.session_config(o.session_timeout);
        ho.stats = [&stats] { return stats; };
        ho.lag = &lag;
        web.emplace(ioc.get_executor(), std::move(ho));
        if (const auto ec = web->bind()) {
            complain("cannot serve HTTP on '" + *listen + "': " + ec.message());
            return ec == std::errc::invalid_argument ? exit_usage : exit_failed;
        }
        const auto ep = web->local_endpoint();
        spdlog::info("zkd: HTTP API on http://{}:{}/ (metrics at /metrics)",
                     ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string(),
                     ep.port());
        lag.start();
    }
    reactor::shutdown_controller signals(ioc.get_executor(), grace, std::move(handlers));
    int running = web ? 2 : 1;
    const auto finished = [&](const std::exception_ptr& e, const char* what) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                spdlog::error("zkd: {} stopped on an error: {}", what, ex.what());
            }
            rc = exit_failed;
        }
        if (--running == 1) {
            web_stop.emit(asio::cancellation_type::terminal);  // the node is gone: so is its API
        }
        if (running == 0 || !web) {
            lag.stop();
            signals.stop();
        }
    };
    const roles::node_links links{&stats, &drain};
    asio::co_spawn(ioc, roles::run_node(o, reg, pool, links),
                   asio::bind_cancellation_slot(stop.slot(), [&](const std::exception_ptr& e) {
                       finished(e, "the node");
                   }));
    if (web) {
        asio::co_spawn(ioc, web->run(), asio::bind_cancellation_slot(web_stop.slot(), [&](const std::exception_ptr& e) {
                           finished(e, "the HTTP API");
                       }));
    }
    ioc.run();
    return rc;
}

}  // namespace zkd::cli
