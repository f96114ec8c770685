// SPDX-License-Identifier: MIT
// zkd run: one cluster member (worker, candidate master, or both), until a signal drains it.
#include "apps/crack/md5_crack.hpp"
#include "cli/commands.hpp"
#include "cli/logging.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "handlers/builtin.hpp"
#include "handlers/exec.hpp"
#include "handlers/registry.hpp"
#include "http/api.hpp"
#include "http/server.hpp"
#include "protocol/delay.hpp"
#include "protocol/placement.hpp"
#include "reactor/event.hpp"
#include "reactor/reactor.hpp"
#include "reactor/signals.hpp"
#include "roles/node.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <stop_token>
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
stopped on an error, 3 if --connect-timeout ran out before a first session.

ZooKeeper unreachable at start or later, zkd run keeps trying (a warning per failed attempt,
backing off to every 5 s plus the session timeout): a daemon outlives ZooKeeper restarts.
With --connect-timeout it gives up (exit 3) when no session came within DUR of starting.
The namespace is created if missing. With --user, a namespace that nodes of other
identities may use (made before the first 'zkd run --user') is refused, with an error
naming the node and its ACL.

Every option can also be set by environment (--session-timeout: ZKD_SESSION_TIMEOUT) or in a
config file (--config FILE or ZKD_CONFIG; lines 'session-timeout = 5s  # a comment'); the
command line wins, then the environment, then the file. Durations take a unit: 500ms, 30s,
5m, 24h, or several from largest to smallest: 4m30s (a bare number is milliseconds).

  --zk CONNECT            ZooKeeper hosts[/path] (default 127.0.0.1:2181)
  --namespace NS          cluster namespace (default "default")
  --connect-timeout DUR   exit 3 if no session came within DUR (default: wait forever)
  --capacity N            task slots: tasks held at once, running or queued for a thread
                          (default: 4 x --threads; 0: never work)
  --threads N             compute pool threads (default: number of cores)
  --role ROLE             auto (default), worker (never master), standby (never work)
  --session-timeout DUR   ZooKeeper session timeout: how long a dead or cut-off member keeps its
                          role (master, tasks) before others take over (default 6s)
  --grace DUR             on SIGTERM, how long running tasks may take to finish (default 30s)
  --user NAME             digest credentials: everything zkd creates is then readable and
  --password SECRET         writable only with the same credentials (prefer ZKD_PASSWORD or
  --password-file FILE      --password-file: flags show in ps)
  --placement POLICY      when master: least-loaded (default: most free slots, up to a
                          worker's threads of one assignment transaction kept together),
                          round-robin, random
  --result-retention DUR  when master: delete results nobody consumed after DUR (default 24h)
  --max-pending N         when master: the bound on pending tasks clients keep to; a submit
                          past it fails with "queue full" (default 1000000, what the embedded
                          ZooKeeper holds; 0: no bound)
  --suspect-after DUR     when master: a worker that leaves an assignment unstarted this long
                          loses it (requeued) and is suspect: no tasks but a probe now and
                          then, until it runs one (default 10s; 0: never)
  --no-direct             when master: clients place no task on a worker themselves, every
                          task goes through the master, strictly by priority (by default a
                          client sends a plain task straight to a worker with room, at
                          about half the latency; docs/cli.md "Priorities and prefetch")
  --retry TYPE=N[:BASE[:MAX]]
                          when worker: a task of TYPE that names no retries of its own is
                          retried up to N times after a failed or timed-out try, retry k
                          waiting a random time in [0, min(MAX, BASE*2^(k-1))] (default
                          BASE 1s, MAX 60 x BASE); repeatable, one TYPE each
  --host NAME             name in member ids (default: the hostname)
  --log-level LEVEL       trace, debug, info (default), warn, error, off
  --log-format FORMAT     text (default) or json (one object per line)
  --http ADDR             serve the HTTP API and /metrics on ADDR (host:port, [v6]:port, or
                          :port for loopback; off by default; see docs/http.md); the
                          queue metrics (zkd_queue_depth, assign latency, requeued, lost,
                          rejected) come only from the node that is master at the time
  --http-token-file FILE  every HTTP request then needs 'Authorization: Bearer <token>', the
  --http-token TOKEN        token being FILE's first line (prefer ZKD_HTTP_TOKEN or the
                            file: flags show in ps); required with --user or beyond loopback
  --http-tls-cert FILE    serve HTTPS with this PEM certificate chain and key; required
  --http-tls-key FILE       beyond loopback
  --http-insecure         serve HTTP beyond loopback (or with --user) without a token or TLS
  --http-max-connections N  connections served at once (default 256); more get 503
  --enable-crash-task     serve the `crash` task type, which aborts this process (for
                          testing poison-task handling; off by default)
  --exec NAME=PROGRAM [ARG...]
                          serve task type NAME by running PROGRAM (args JSON on stdin, result
                          on stdout; no shell: the value is split on spaces); repeatable,
                          once per NAME (replaces the config file's 'exec.NAME' program).
                          Per-type settings (timeout, max-output, concurrency, output, env,
                          dir, user, kill-grace, memory-limit, cpu-limit, max-processes,
                          max-open-files) go in the config file as 'exec.NAME.SETTING
                          = VALUE', and 'exec.NAME = PROGRAM [ARG...]' defines one there:
                          see docs/exec.md
  --serve NAME=PROGRAM [ARG...]
                          serve task type NAME with long-lived PROGRAM processes, each given
                          one task at a time as JSON lines on stdin and answering on stdout
                          (docs/exec.md "Serve mode"); repeatable, as --exec. Settings as for
                          --exec, plus warm, max-tasks, max-memory, start-timeout
  --exec-limits MECHANISM how exec types' limits (memory-limit, cpu-limit, max-processes,
                          max-open-files) are enforced: auto (default: a cgroup v2 subtree
                          delegated to zkd if there is one, else rlimits), cgroup (any
                          writable cgroup v2 subtree, or refuse to start), rlimit; the log
                          says at start what is in force for each type (docs/exec.md "Limits")
  --config FILE           read options from FILE
  --version               print zkd's version
)";

/// The HTTP facade's protections from the options: the token, TLS, the connection limit;
/// refuses (usage error) to expose the API beyond loopback, or a protected cluster's API,
/// without them unless --http-insecure.
void configure_http(const args& a, const cluster_target& target, http::server_options& ho) {
    std::string token = a.get("--http-token", "");
    std::string token_from = "--http-token";
    if (const auto file = a.value("--http-token-file")) {
        if (!token.empty()) {
            throw usage_error("give the HTTP token once: --http-token or --http-token-file");
        }
        std::ifstream in(*file);
        if (!in) {
            throw usage_error("cannot read --http-token-file '" + *file + "'");
        }
        std::getline(in, token);
        while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) {
            token.pop_back();
        }
        token_from = "--http-token-file '" + *file + "'";
    }
    if (a.value("--http-token") || a.value("--http-token-file")) {
        if (auto ok = http::check_token(token); !ok) {
            throw usage_error(token_from + ": " + ok.error());
        }
    }
    ho.token = token;
    ho.tls_cert_file = a.get("--http-tls-cert", "");
    ho.tls_key_file = a.get("--http-tls-key", "");
    if (ho.tls_cert_file.empty() != ho.tls_key_file.empty()) {
        throw usage_error("--http-tls-cert and --http-tls-key go together");
    }
    for (const auto* f : {&ho.tls_cert_file, &ho.tls_key_file}) {
        if (!f->empty() && !std::ifstream(*f)) {
            throw usage_error("cannot read the TLS file '" + *f + "'");
        }
    }
    ho.max_connections =
        static_cast<std::size_t>(a.number("--http-max-connections", 256, 1, 100'000));
    const auto ep = http::parse_listen_address(ho.listen);
    if (!ep) {
        throw usage_error(
            "--http wants HOST:PORT, [IPV6]:PORT or :PORT (loopback), e.g. 127.0.0.1:8080, "
            "not '" +
            ho.listen + "'"
        );
    }
    const auto problem = http::exposure_problem(
        *ep, !token.empty(), !ho.tls_cert_file.empty(), target.auth.has_value()
    );
    if (problem.empty()) {
        return;
    }
    if (!a.has("--http-insecure")) {
        throw usage_error(
            "refusing to serve HTTP on '" + ho.listen + "': " + problem +
            " (or --http-insecure to serve anyway)"
        );
    }
    spdlog::warn("zkd: --http-insecure: serving HTTP on '{}' although {}", ho.listen, problem);
}

}  // namespace

namespace {

/// The exec types of --exec, --serve and the config file's `exec.*` lines, checked (a
/// missing or non-executable program is a usage error naming the type), in `reg`. A one-shot
/// type that names no concurrency runs at most `capacity` programs at once: a bundle takes
/// one slot and starts its tasks together, so slots alone would not bound it.
void add_exec_types(const args& a, handlers::registry& reg, int capacity) {
    std::vector<handlers::exec::file_setting> file;
    for (const auto& [key, entry] : a.exec_settings()) {
        file.push_back({key, entry.value, entry.where});
    }
    try {
        auto types = handlers::exec::configure(file, a.values("--exec"), a.values("--serve"));
        const auto lookup = [](const std::string& name) -> std::optional<std::string> {
            const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
            return v == nullptr ? std::nullopt : std::optional<std::string>(v);
        };
        const std::string mechanism = a.get("--exec-limits", "auto");
        if (mechanism != "auto" && mechanism != "cgroup" && mechanism != "rlimit") {
            throw usage_error(a.source("--exec-limits") + " wants auto, cgroup or rlimit");
        }
        const auto mode = mechanism == "cgroup"   ? handlers::exec::limits_mode::cgroup
                          : mechanism == "rlimit" ? handlers::exec::limits_mode::rlimit
                                                  : handlers::exec::limits_mode::automatic;
        // A cgroup only when a type has a limit that one enforces better than an rlimit.
        handlers::exec::cgroup_support cg;
        cg.reason = "no type needs one";
        for (const auto& [name, c] : types) {
            const auto& l = c.limits;
            if (mode != handlers::exec::limits_mode::rlimit &&
                (l.memory > 0 || l.cpu_percent > 0 || l.max_processes > 0)) {
                cg = handlers::exec::detect_cgroup(mode);
                break;
            }
        }
        if (mode == handlers::exec::limits_mode::cgroup && !cg.usable &&
            cg.reason != "no type needs one") {
            throw usage_error("--exec-limits cgroup: cannot use cgroup v2: " + cg.reason);
        }
        if (cg.usable) {
            spdlog::info(
                "zkd: exec limits: cgroup v2 below {} (controllers:{}{}{})", cg.path,
                cg.memory ? " memory" : "", cg.cpu ? " cpu" : "", cg.pids ? " pids" : ""
            );
        } else if (mode != handlers::exec::limits_mode::rlimit && cg.reason != "no type needs one") {
            spdlog::info("zkd: exec limits: rlimits (no cgroup v2: {})", cg.reason);
        }
        for (auto& [name, c] : types) {
            if (reg.find(name) != nullptr || reg.find_async(name) != nullptr) {
                throw usage_error("exec type '" + name + "': a built-in task type has that name");
            }
            if (c.mode == handlers::exec::run_mode::once && c.concurrency == 0) {
                c.concurrency = capacity;
            }
            auto p = handlers::exec::resolve(std::move(c), lookup, cg);
            const std::string limits = handlers::exec::describe_limits(p.config.limits, p.plan);
            const bool lax = limits.find("NOT IN FORCE") != std::string::npos;
            spdlog::log(
                lax ? spdlog::level::warn : spdlog::level::info, "zkd: exec type {}: {} ({}; {})",
                name, p.path,
                p.config.mode == handlers::exec::run_mode::serve ? "served" : "a process per task",
                limits
            );
            handlers::exec::add_exec_type(reg, std::move(p));
        }
    } catch (const std::invalid_argument& e) {
        throw usage_error(e.what());
    }
}

}  // namespace

int cmd_run(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2,
        cluster_options(
            {{"--capacity"},
             {"--threads"},
             {"--role"},
             {"--session-timeout"},
             {"--placement"},
             {"--host"},
             {"--log-level"},
             {"--log-format"},
             {"--grace"},
             {"--result-retention"},
             {"--max-pending"},
             {"--no-direct", false, true},
             {"--suspect-after"},
             {"--http"},
             {"--http-token"},
             {"--http-token-file"},
             {"--http-tls-cert"},
             {"--http-tls-key"},
             {"--http-insecure", false, true},
             {"--http-max-connections"},
             {"--enable-crash-task", false, true},
             {"--exec", true, false, true},
             {"--serve", true, false, true},
             {"--exec-limits"},
             {"--retry", true, false, true}}
        )
    );
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
    const auto threads = static_cast<std::size_t>(a.number("--threads", cores, 1, 1024));
    // A worker holds more tasks than it runs (prefetch, like Celery's multiplier of 4), so its
    // threads never idle while the master refills a slot and T2/T4 batch: a burst of no-op
    // tasks on 4 default nodes of 2 cores went from 826 to 1,409 tasks/s and from 2.9 to 1.9
    // ZooKeeper writes per task. The price: a task may wait behind capacity - threads others
    // on its worker, whatever their priority (docs/cli.md, "Priorities and prefetch").
    o.capacity =
        static_cast<int>(a.number("--capacity", 4 * static_cast<long>(threads), 0, 100'000));
    o.session_timeout = a.duration("--session-timeout", roles::default_session_timeout, 400ms, 1h);
    o.master.result_retention = a.duration("--result-retention", 24h, 1s, 24h * 365);
    o.master.max_pending = static_cast<std::uint64_t>(a.number(
        "--max-pending", static_cast<long>(protocol::default_max_pending), 0, 1'000'000'000'000
    ));
    o.master.direct_placement = !a.has("--no-direct");
    o.master.unstarted_bound = a.duration("--suspect-after", 10s, 0ms, 24h);
    if (o.master.unstarted_bound.count() > 0 && o.master.unstarted_bound < 1s) {
        throw usage_error("--suspect-after wants 0 (never) or at least 1s");
    }
    for (const auto& spec : a.values("--retry")) {
        const auto eq = spec.find('=');
        const auto type = spec.substr(0, std::min(eq, spec.size()));
        const auto rest = eq == std::string::npos ? std::string() : spec.substr(eq + 1);
        const auto colon = rest.find(':');
        const auto n = rest.substr(0, colon);
        const bool number =
            !n.empty() && n.size() <= 3 && n.find_first_not_of("0123456789") == std::string::npos;
        std::optional<protocol::backoff_policy> p = protocol::backoff_policy{};
        if (colon != std::string::npos) {
            p = protocol::parse_backoff(rest.substr(colon + 1));
        }
        if (!protocol::is_valid_task_type(type) || !number || !p ||
            std::stoi(n) > protocol::max_retries_limit) {
            throw usage_error(
                "--retry wants TYPE=N[:BASE[:MAX]] (N from 0 to 100, BASE and MAX durations), "
                "not '" +
                spec + "'"
            );
        }
        p->retries = std::stoi(n);
        o.worker.retry_defaults[type] = *p;
    }
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
        throw usage_error(
            a.source("--role") + " wants auto, worker or standby, not '" + role + "'"
        );
    }
    const auto policy = protocol::parse_placement_policy(a.get("--placement", "least-loaded"));
    if (!policy) {
        throw usage_error(a.source("--placement") + " wants least-loaded, round-robin or random");
    }
    o.master.policy = *policy;
    setup_logging(
        a.get("--log-level", "info"), a.get("--log-format", "text"), a.source("--log-level"),
        a.source("--log-format")
    );

    if (const auto open = open_cluster_warning(target); !open.empty()) {
        spdlog::warn("zkd: {}", open);
    }

    // The event loop, the compute pool handlers run on, and (serving HTTP) the lag probe.
    const auto listen = a.value("--http");
    reactor::reactor core(
        {.compute_threads = threads,
         .lag_interval = listen ? std::chrono::milliseconds(100) : std::chrono::milliseconds(0)}
    );
    // After the loop: a served type's timers and pipes, bound to the loop when its service
    // ran, must be destroyed while the loop still exists.
    handlers::registry reg;
    handlers::add_builtin_handlers(reg, a.has("--enable-crash-task"));
    crack::add_handlers(reg);  // md5-crack, the partitions of `zkd crack`
    add_exec_types(a, reg, o.capacity);
    const auto loop = core.get_executor();
    asio::cancellation_signal stop;
    reactor::event drain(loop);
    roles::node_stats stats;
    int rc = exit_ok;
    reactor::shutdown_handlers handlers;
    handlers.on_graceful = [&](int signo) {
        spdlog::info(
            "zkd: signal {}: draining: no new tasks, {} s for the running ones to finish "
            "(signal again to exit at once)",
            signo, std::chrono::duration_cast<std::chrono::seconds>(grace).count()
        );
        drain.set();
    };
    bool stopped = false;  // told to stop: ending is then no failure
    handlers.on_grace_expired = [&] {
        stopped = true;
        spdlog::warn(
            "zkd: grace period over: stopping the tasks still running (they go back to "
            "the queue)"
        );
        stop.emit(asio::cancellation_type::terminal);
    };
    // The HTTP facade, when asked for: bound before joining, so a taken port fails fast.
    std::optional<http::server> web;
    asio::cancellation_signal web_stop;
    if (listen) {
        http::server_options ho;
        ho.listen = *listen;
        configure_http(a, target, ho);
        const bool tls = !ho.tls_cert_file.empty();
        ho.zk = target.session_config(o.session_timeout);
        ho.stats = [&stats] { return stats; };
        ho.lag = &core.lag();
        web.emplace(loop, std::move(ho));
        if (const auto ec = web->bind()) {
            complain("cannot serve HTTP on '" + *listen + "': " + ec.message());
            const bool bad_tls_file = ec.category() == asio::error::get_ssl_category();
            return ec == std::errc::invalid_argument || bad_tls_file ? exit_usage : exit_failed;
        }
        const auto ep = web->local_endpoint();
        spdlog::info(
            "zkd: HTTP API on {}://{}:{}/ (metrics at /metrics)", tls ? "https" : "http",
            ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string(),
            ep.port()
        );
    }
    reactor::shutdown_controller signals(loop, grace, std::move(handlers));
    // A daemon waits for ZooKeeper however long it takes (logging each failed attempt),
    // unless told otherwise: --connect-timeout bounds the wait for the first session.
    asio::steady_timer first_session(loop, asio::steady_timer::time_point::max());
    if (a.has("--connect-timeout")) {
        first_session.expires_after(target.connect_timeout);
        first_session.async_wait([&](boost::system::error_code ec) {
            if (ec || stats.sessions > 0) {
                return;
            }
            spdlog::error(
                "zkd: no session with ZooKeeper at {} within {} ms ({}): giving up", target.hosts,
                target.connect_timeout.count(), a.source("--connect-timeout")
            );
            rc = exit_unreachable;
            stopped = true;
            stop.emit(asio::cancellation_type::terminal);
        });
    }
    int running = web ? 2 : 1;
    const auto finished = [&](const std::exception_ptr& e, const char* what) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                spdlog::error("zkd: {} stopped on an error: {}", what, ex.what());
            }
            rc = rc == exit_ok ? exit_failed : rc;
        }
        if (--running == 1) {
            web_stop.emit(asio::cancellation_type::terminal);  // the node is gone: so is its API
        }
        if (running == 0 || !web) {
            core.lag().stop();  // the loop then runs out of work and core.run() returns
            signals.stop();
            first_session.cancel();
        }
    };
    // The registry's services (served exec types' processes) run beside the node and stop
    // once it has finished: its tasks are drained or stopped by then.
    std::stop_source services_stop;
    for (const auto& service : reg.services()) {
        asio::co_spawn(loop, service(services_stop.get_token()), [](const std::exception_ptr& e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    spdlog::error("zkd: a service stopped on an error: {}", ex.what());
                }
            }
        });
    }
    const roles::node_links links{&stats, &drain};
    asio::co_spawn(
        loop, roles::run_node(o, reg, core.pool(), links),
        asio::bind_cancellation_slot(
            stop.slot(),
            [&](const std::exception_ptr& e) {
                services_stop.request_stop();
                if (!e && !drain.is_set() && !stopped && rc == exit_ok) {
                    // It gave up by itself (e.g. a namespace it must refuse): it said why.
                    rc = exit_failed;
                }
                finished(e, "the node");
            }
        )
    );
    if (web) {
        asio::co_spawn(
            loop, web->run(),
            asio::bind_cancellation_slot(
                web_stop.slot(), [&](const std::exception_ptr& e) { finished(e, "the HTTP API"); }
            )
        );
    }
    core.run();
    return rc;
}

}  // namespace zkd::cli
