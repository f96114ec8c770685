// SPDX-License-Identifier: MIT
// zkd submit, wait, status, cancel: one task at a time, through roles::task_client.
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/syntax.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace zkd::cli {

namespace {

constexpr const char* submit_help = R"(usage: zkd submit TYPE [ARGS-JSON | @FILE | -] [options]

Submits one task of a registered TYPE (built in: echo, sum, sleep, spin, fail, md5-crack;
crash where workers run with --enable-crash-task) with JSON arguments (default null), given
inline, read from FILE (@FILE) or from stdin (-), up to 1 MiB. Prints the task id, or with
--wait the result as JSON; with --wait, exits 0 only if the task succeeded (1 if it failed,
timed out, was cancelled or lost; 4 if --timeout ran out). Interrupted (Ctrl-C) while
waiting, it says the task's id and how to wait for it on stderr and exits 130; the task
goes on.

The namespace must hold a cluster (a 'zkd run' made it), and when workers are there, one of
them must serve TYPE: otherwise submit fails (exit 1) and says so, sending nothing. When the
cluster's queue is full (as many tasks pending as the master's 'zkd run --max-pending'
allows) submit fails with exit 6, sending nothing: submit again once tasks have drained.

  --wait                  wait for the result and print it
  --timeout DUR           with --wait: give up after DUR (exit 4; the task goes on)
  --priority P            0 (lowest) to 9 (highest), default 5
  --task-timeout DUR      the handler's time limit (default none)
  --max-attempts N        runs allowed if workers die (default 3)
  --delay DUR             start no earlier than DUR from now (the task waits as
                          'delayed'; with --wait, the wait includes the delay)
  --at TIME               start no earlier than TIME: RFC 3339 (2026-11-27T08:30:00Z,
                          ...+01:00) or milliseconds since the epoch
  --retries N             retry a try that failed or timed out up to N times (0 to 100;
                          default: the workers' default for TYPE, else 0); bad_args,
                          unknown_type, malformed_task and cancellation never retry.
                          Unlike --max-attempts (worker losses), retries follow failures
  --backoff BASE[:MAX]    retry k waits a random time in [0, min(MAX, BASE*2^(k-1))]
                          (default 1s:60s; MAX default 60 x BASE)
  --allow-unserved        submit even though no worker serves TYPE now (one that does is
                          about to join)
  --create-namespace      create the namespace if no cluster is there yet (the task waits
                          for a 'zkd run' in it))";

constexpr const char* wait_help = R"(usage: zkd wait ID [options]

Waits for task ID's result (by a ZooKeeper watch, never polling), prints it as JSON and
consumes it (a result is delivered once). Exits 0 if the task succeeded, 1 if it ended
otherwise, 4 if --timeout ran out, 5 if there is no such task (never submitted, or its
result was already consumed).

  --timeout DUR           give up after DUR (exit 4))";

constexpr const char* status_help = R"(usage: zkd status ID [options]

Shows where task ID is: delayed (until its due time; a retry with its try and last error),
pending, assigned or running (with its worker), or finished with its result (shown, not
consumed). Exits 0 if the task is known, 5 if not.

  --json                  print {"id","state","worker","result"} as JSON)";

constexpr const char* cancel_help = R"(usage: zkd cancel ID [options]

Asks the master to cancel task ID: a pending task ends at once, a running one is told to
stop. A task of a bundle (ID <bundle>.<index>) is cancelled alone: the bundle's other
tasks run on (its result comes with theirs); a bundle's own ID cancels all of it. Exits 0
when the request is placed, 1 if the task has already finished, 5 if there is no such task.

  --wait                  wait for the task's outcome and print it
  --timeout DUR           with --wait: give up after DUR (exit 4))";

bool wants_help(const args& a, const char* text) {
    if (!a.has("--help")) {
        return false;
    }
    std::printf("%s\n%s", text, cluster_flags_help);
    return true;
}

std::string one_id(const args& a, const char* command) {
    if (a.positional.size() != 1) {
        throw usage_error(std::string(command) + " wants exactly one task ID");
    }
    if (!protocol::parse_task_ref(a.positional[0])) {
        throw usage_error(
            "'" + a.positional[0] + "' is not a task id (t<P>-<ms>-<hex>, or <bundle>.<index>)"
        );
    }
    return a.positional[0];
}

/// The ARGS-JSON argument's text: itself, the contents of @FILE, or stdin for "-".
std::string args_text(const std::string& arg) {
    constexpr std::size_t most = 1 << 20;  // what the HTTP API takes in one body
    if (arg != "-" && !arg.starts_with('@')) {
        return arg;
    }
    const std::string from = arg == "-" ? "stdin" : "'" + arg.substr(1) + "'";
    std::string text;
    const auto read_all = [&](std::istream& in) {
        text.assign(std::istreambuf_iterator<char>(in.rdbuf()), std::istreambuf_iterator<char>());
        if (in.bad()) {
            throw usage_error("cannot read ARGS-JSON from " + from);
        }
    };
    if (arg == "-") {
        read_all(std::cin);
    } else {
        std::ifstream in(arg.substr(1), std::ios::binary);
        if (!in) {
            throw usage_error("cannot read ARGS-JSON from " + from);
        }
        read_all(in);
    }
    if (text.size() > most) {
        throw usage_error(
            "ARGS-JSON from " + from + " is over 1 MiB (" + std::to_string(text.size()) + " bytes)"
        );
    }
    return text;
}

/// When workers are there and none serves `type`: a message saying so (who serves what).
asio::awaitable<std::optional<std::string>> unserved(zkco::client& zk, std::string type) {
    auto workers = co_await roles::read_workers(zk);
    if (!workers) {
        co_return std::nullopt;  // the master fails it later if it must; do not block on a view
    }
    auto no = roles::unserved(*workers, type);
    if (!no) {
        co_return std::nullopt;
    }
    co_return *no +
        "; nothing was submitted. Pass --allow-unserved if a worker that serves it is about "
        "to join";
}

std::string no_such_task(const std::string& id) {
    return "no task " + id +
           " found: not pending, assigned or finished (never submitted, its result consumed or "
           "collected, or its assignment deleted by someone else while it runs)";
}

/// Waits for and prints the result; the exit code says how the task ended.
/// Draws the task's progress on stderr (a terminal) once a second, as the worker publishes
/// it, until cancelled; then erases the line.
asio::awaitable<void> progress_bar(zkco::client& zk, protocol::layout l, std::string id) {
    co_await asio::this_coro::throw_if_cancelled(false);
    bool drawn = false;
    for (;;) {
        const bool waited = co_await zkco::pause(1s);
        if (!waited) {
            break;
        }
        auto info = co_await roles::read_task(zk, l, id);
        if (!info || info->progress < 0 || info->result) {
            continue;
        }
        constexpr int width = 30;
        const auto filled = static_cast<int>(std::lround(info->progress * width));
        std::fprintf(
            stderr, "\r\033[K[%s%s] %3.0f%% %.60s", std::string(filled, '#').c_str(),
            std::string(width - filled, '.').c_str(), info->progress * 100,
            info->progress_message.c_str()
        );
        std::fflush(stderr);
        drawn = true;
    }
    if (drawn) {
        std::fputs("\r\033[K", stderr);
        std::fflush(stderr);
    }
}

asio::awaitable<zkco::result<protocol::task_result>> wait_for(
    roles::task_client& tc, std::string id, std::chrono::milliseconds timeout
) {
    if (timeout.count() > 0) {
        co_return co_await zkco::with_timeout(tc.wait(id), timeout);
    }
    co_return co_await tc.wait(id);
}

/// Waits for the task's result and prints it; on a terminal, with a progress bar while the
/// task reports progress (`bar` null: none).
asio::awaitable<int> print_result(
    roles::task_client& tc,
    std::string id,
    std::chrono::milliseconds timeout,
    zkco::client* bar = nullptr,
    protocol::layout l = {}
) {
    zkco::result<protocol::task_result> result = zkco::error_code(zkco::errc::operation_timeout);
    if (bar != nullptr && ::isatty(STDERR_FILENO) == 1) {
        using namespace asio::experimental::awaitable_operators;
        auto either = co_await (wait_for(tc, id, timeout) || progress_bar(*bar, l, id));
        if (either.index() == 0) {
            result = std::move(std::get<0>(either));
        }
    } else {
        result = co_await wait_for(tc, id, timeout);
    }
    if (!result) {
        if (result.error() == zkco::errc::operation_timeout) {
            complain(
                "task " + id + ": no result within " + std::to_string(timeout.count()) +
                " ms (it goes on; 'zkd wait " + id + "' later)"
            );
            co_return exit_timeout;
        }
        complain("task " + id + ": " + result.error().message());
        co_await tc.close();  // a garbage result's delete (§8) must reach the server too
        co_return exit_failed;
    }
    std::printf("%s\n", protocol::encode(*result).c_str());
    std::fflush(stdout);
    // The result's delete must reach the server before we close; and a client whose every
    // task was consumed leaves no empty results directory behind.
    co_await tc.close();
    co_return result->state == protocol::task_state::succeeded ? exit_ok : exit_failed;
}

/// The task's status, or an exit code after saying what went wrong. With `garbage_waits`, a
/// garbage result (§8) counts as known, with the state unknown: the caller's wait then
/// returns it as an error and deletes it.
asio::awaitable<std::variant<roles::task_status, int>> known_status(
    roles::task_client& tc, std::string id, bool garbage_waits = false
) {
    auto st = co_await tc.status(id);
    if (!st && garbage_waits && st.error() == roles::client_errc::garbage_result) {
        co_return roles::task_status{};
    }
    if (!st) {
        complain("task " + id + ": " + st.error().message());
        co_return exit_failed;
    }
    if (st->state == protocol::task_state::unknown) {
        complain(no_such_task(id));
        co_return exit_not_found;
    }
    co_return std::move(*st);
}

}  // namespace

int cmd_submit(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2,
        cluster_options(
            {{"--wait", false, false},
             {"--timeout", true, false},
             {"--priority"},
             {"--task-timeout"},
             {"--max-attempts"},
             {"--delay"},
             {"--at"},
             {"--retries"},
             {"--backoff"},
             {"--allow-unserved", false, false},
             {"--create-namespace", false, false}}
        )
    );
    if (wants_help(a, submit_help)) {
        return exit_ok;
    }
    if (a.positional.empty() || a.positional.size() > 2) {
        throw usage_error("submit wants TYPE [ARGS-JSON]");
    }
    protocol::task_spec req;
    req.type = a.positional[0];
    if (!protocol::is_valid_task_type(req.type)) {
        throw usage_error(
            "'" + req.type + "' is not a valid task type name (1-128 of A-Z a-z 0-9 _ . : -)"
        );
    }
    if (a.positional.size() == 2) {
        boost::system::error_code ec;
        req.args = protocol::parse_json(args_text(a.positional[1]), ec);  // the protocol's depth
        if (ec) {
            throw usage_error("ARGS-JSON is not JSON: " + ec.message());
        }
    }
    req.priority = static_cast<int>(a.number(
        "--priority", protocol::default_priority, protocol::min_priority, protocol::max_priority
    ));
    req.timeout = a.duration("--task-timeout", 0ms, 0ms, 24h);
    req.max_attempts =
        static_cast<int>(a.number("--max-attempts", 3, 1, protocol::max_attempts_limit));
    roles::submit_options sopts;
    if (a.has("--delay") && a.has("--at")) {
        throw usage_error("submit: --delay and --at both say when; give one");
    }
    if (a.has("--delay")) {
        sopts.due_ms = protocol::now_ms() + a.duration("--delay", 0ms, 0ms, 24h * 366 * 10).count();
    }
    if (a.has("--at")) {
        const auto at = protocol::parse_time(a.value("--at").value_or(""));
        if (!at) {
            throw usage_error(
                "submit: --at wants a time: RFC 3339 (2026-11-27T08:30:00Z) or milliseconds "
                "since the epoch, not '" +
                a.value("--at").value_or("") + "'"
            );
        }
        sopts.due_ms = *at;
    }
    if (a.has("--retries")) {
        sopts.retries = static_cast<int>(a.number("--retries", 0, 0, protocol::max_retries_limit));
    }
    if (a.has("--backoff")) {
        sopts.backoff = protocol::parse_backoff(a.value("--backoff").value_or(""));
        if (!sopts.backoff) {
            throw usage_error(
                "submit: --backoff wants BASE or BASE:MAX, durations (" +
                std::string(protocol::duration_forms) + "), BASE > 0, MAX >= BASE, at most 24h"
            );
        }
    }
    const bool wait = a.has("--wait");
    if (a.has("--timeout") && !wait) {
        throw usage_error(
            "submit: --timeout bounds --wait, and is given without it (the task's own time "
            "limit is --task-timeout)"
        );
    }
    const auto timeout = a.duration("--timeout", 0ms, 0ms, 24h * 365);
    const bool check_type = !a.has("--allow-unserved");
    const auto target = target_of(a);
    const auto mode =
        a.has("--create-namespace") ? namespace_mode::create : namespace_mode::offer_create;
    return with_cluster(
        target, mode,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            using namespace asio::experimental::awaitable_operators;
            if (check_type) {
                const auto no = co_await unserved(zk, req.type);
                if (no) {
                    complain(*no);
                    co_return exit_failed;
                }
            }
            // From here on an interrupt must not lose the task's id: it is reported, not fatal.
            asio::signal_set interrupt(co_await asio::this_coro::executor, SIGINT, SIGTERM);
            roles::task_client tc(zk, l);
            std::vector<protocol::task_spec> one{req};
            auto ids = co_await tc.submit(std::move(one), sopts);
            if (!ids && ids.error() == roles::client_errc::queue_full) {
                const auto& q = tc.last_queue_check();
                complain(
                    "queue full: " + std::to_string(q.pending) + " pending, bound " +
                    std::to_string(q.bound) +
                    " (zkd run --max-pending); nothing was submitted: try again once tasks "
                    "have drained"
                );
                co_return exit_queue_full;
            }
            if (!ids) {
                complain("submit failed: " + ids.error().message());
                co_return exit_failed;
            }
            const std::string id = ids->front();
            if (!wait) {
                std::printf("%s\n", id.c_str());
                co_return exit_ok;
            }
            auto outcome = co_await (
                print_result(tc, id, timeout, &zk, l) ||
                interrupt.async_wait(asio::as_tuple(asio::use_awaitable))
            );
            if (outcome.index() == 0) {
                co_return std::get<0>(outcome);
            }
            complain(
                "interrupted: task " + id + " goes on; wait for its result with 'zkd wait " + id +
                "' (or stop it: 'zkd cancel " + id + "')"
            );
            co_return exit_interrupted;
        }
    );
}

int cmd_wait(int argc, char** argv) {
    const auto a = args::parse(argc, argv, 2, cluster_options({{"--timeout", true, false}}));
    if (wants_help(a, wait_help)) {
        return exit_ok;
    }
    const auto id = one_id(a, "wait");
    const auto timeout = a.duration("--timeout", 0ms, 0ms, 24h * 365);
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            roles::task_client tc(zk, l);
            auto st = co_await known_status(tc, id, true);
            if (std::holds_alternative<int>(st)) {
                co_return std::get<int>(st);
            }
            const int rc = co_await print_result(tc, id, timeout, &zk, l);
            if (rc == exit_ok || rc == exit_failed) {
                // The result was the last in its client's directory (a `zkd submit` that did
                // not wait, say): the empty directory goes now, not at the master's sweep.
                // One with results left is not empty: the delete then fails, harmlessly.
                const auto node = protocol::parse_task_ref(id)->node;
                if (const auto dir = l.result_dir(node);
                    protocol::layout::is_client_results(zkco::base_name(dir))) {
                    co_await zk.remove(dir);
                }
            }
            co_return rc;
        }
    );
}

int cmd_status(int argc, char** argv) {
    const auto a = args::parse(argc, argv, 2, cluster_options({{"--json", false, false}}));
    if (wants_help(a, status_help)) {
        return exit_ok;
    }
    const auto id = one_id(a, "status");
    const bool as_json = a.has("--json");
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            auto info = co_await roles::read_task(zk, l, id);
            if (!info) {
                complain("task " + id + ": " + info.error().message());
                co_return exit_failed;
            }
            if (info->state == protocol::task_state::unknown) {
                complain(
                    info->garbage.empty() ? no_such_task(id) : "task " + id + ": " + info->garbage
                );
                co_return info->garbage.empty() ? exit_not_found : exit_failed;
            }
            const std::string state(protocol::to_string(info->state));
            if (as_json) {
                std::printf(
                    "%s\n", protocol::to_text(roles::to_json(*info)).c_str()
                );  // as GET /v1/tasks/{id}
            } else if (info->result) {
                std::printf(
                    "%s %s\n%s\n", id.c_str(), state.c_str(),
                    protocol::encode(*info->result).c_str()
                );
            } else if (info->delay) {
                // Delayed: its due time, and for a retry its try and the last error.
                std::string line = id + " " + state;
                if (info->delay->due_ms) {
                    line += " until " + protocol::format_time(*info->delay->due_ms);
                }
                if (info->delay->try_number > 1) {
                    line += " (try " + std::to_string(info->delay->try_number) + ")";
                }
                std::printf("%s\n", printable(line).c_str());
                if (!info->delay->errors.empty() && info->delay->errors.back().is_object()) {
                    const auto last = protocol::to_text(info->delay->errors.back().get_object());
                    std::printf("last error: %s\n", printable(last).c_str());
                }
            } else if (!info->worker.empty() && info->progress >= 0) {
                std::printf(
                    "%s %s on %s: %.0f%% %s\n", id.c_str(), state.c_str(),
                    printable(info->worker).c_str(), info->progress * 100,
                    printable(info->progress_message).c_str()
                );
            } else if (!info->worker.empty()) {
                std::printf(
                    "%s %s on %s\n", id.c_str(), state.c_str(), printable(info->worker).c_str()
                );
            } else {
                std::printf("%s %s\n", id.c_str(), state.c_str());
            }
            co_return exit_ok;
        }
    );
}

int cmd_cancel(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2, cluster_options({{"--wait", false, false}, {"--timeout", true, false}})
    );
    if (wants_help(a, cancel_help)) {
        return exit_ok;
    }
    const auto id = one_id(a, "cancel");
    const bool wait = a.has("--wait");
    const auto timeout = a.duration("--timeout", 0ms, 0ms, 24h * 365);
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            roles::task_client tc(zk, l);
            auto known = co_await known_status(tc, id);
            if (std::holds_alternative<int>(known)) {
                co_return std::get<int>(known);
            }
            const auto& st = std::get<roles::task_status>(known);
            if (st.result) {
                complain(
                    "task " + id + " has already finished (" +
                    std::string(protocol::to_string(st.state)) + ")"
                );
                co_return exit_failed;
            }
            auto c = co_await tc.cancel(id);
            if (!c) {
                complain("cannot cancel " + id + ": " + c.error().message());
                co_return exit_failed;
            }
            if (!wait) {
                std::printf(
                    "cancel requested for %s (%s)\n", id.c_str(),
                    std::string(protocol::to_string(st.state)).c_str()
                );
                co_return exit_ok;
            }
            const int rc = co_await print_result(tc, id, timeout);
            co_return rc == exit_failed ? exit_ok : rc;  // cancelled is what was asked for
        }
    );
}

}  // namespace zkd::cli
