// SPDX-License-Identifier: MIT
// zkd tasks and zkd cluster: read-only views (roles/client/inspect.hpp), as tables or JSON.
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "protocol/ids.hpp"
#include "roles/client/inspect.hpp"

#include <boost/json.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::cli {

namespace {

constexpr const char* tasks_help = R"(usage: zkd tasks [options]

Lists the tasks waiting (pending, in priority then submit order), those held by workers
(assigned or running), with type, worker, age and attempt, and the delayed tasks and
retries waiting for their time (state delayed, soonest due first), with their try and due
time (zkd submit --delay/--at, --retries).

  --limit N               list at most N of each (default 1000); totals are always shown
                          (the delayed tasks listed are the N whose ids hold the earliest
                          times; a retry keeps its first try's id)
  --json                  print the list as JSON
  --zk, --namespace, --connect-timeout, --user, --password, --password-file, --config
                          as for every command (see 'zkd submit --help')
)";

constexpr const char* cluster_help = R"(usage: zkd cluster [options]

Shows the cluster: the acting master (epoch, since when, tasks finished per second over the
last minute), each worker with its load (tasks held / capacity), running tasks, threads
(tasks it runs side by side; "-" for a worker that does not say) and types,
and the queue (pending tasks, delayed tasks and retries waiting for their time, results not
yet consumed, open cancel requests).

  --json                  print the view as JSON
  --zk, --namespace, --connect-timeout, --user, --password, --password-file, --config
                          as for every command (see 'zkd submit --help')
)";

/// 850ms, 12.3s, 3m10s, 2h05m.
std::string brief_age(std::int64_t ms) {
    char buf[32];
    if (ms < 1000) {
        std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
    } else if (ms < 60'000) {
        std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
    } else if (ms < 3'600'000) {
        std::snprintf(
            buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
            static_cast<long long>(ms / 1000 % 60)
        );
    } else {
        std::snprintf(
            buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
            static_cast<long long>(ms / 60'000 % 60)
        );
    }
    return buf;
}

std::string local_time(std::int64_t ms) {
    const std::time_t t = ms / 1000;
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) {
        out += (out.empty() ? "" : ",") + s;
    }
    return out.empty() ? "-" : out;
}

void print_tasks(const roles::task_list& list) {
    std::printf(
        "%-36s %-9s %-12s %-28s %3s %8s %s\n", "ID", "STATE", "TYPE", "WORKER", "PRI", "AGE",
        "ATTEMPT"
    );
    const auto row = [](const roles::task_entry& t) {
        if (!t.garbage.empty()) {
            std::printf(
                "%-36s %-9s (garbage: %s)\n", printable(t.id).c_str(), "?",
                printable(t.garbage).c_str()
            );
            return;
        }
        // A bundle: its type and how many tasks it holds.
        const auto type = t.tasks > 1 ? t.type + " x" + std::to_string(t.tasks) : t.type;
        if (t.state == protocol::task_state::delayed) {
            const auto in = t.due_ms - protocol::now_ms();
            std::printf(
                "%-36s %-9s %-12s %-28s %3d %8s try %d, due %s (%s%s)\n", printable(t.id).c_str(),
                "delayed", printable(type).c_str(), "-", t.priority, brief_age(t.age_ms).c_str(),
                t.try_number, local_time(t.due_ms).c_str(), in > 0 ? "in " : "",
                in > 0 ? brief_age(in).c_str() : "now"
            );
            return;
        }
        std::printf(
            "%-36s %-9s %-12s %-28s %3d %8s %d", printable(t.id).c_str(),
            std::string(protocol::to_string(t.state)).c_str(), printable(type).c_str(),
            t.worker.empty() ? "-" : printable(t.worker).c_str(), t.priority,
            brief_age(t.age_ms).c_str(), t.attempt
        );
        if (t.progress >= 0) {  // what the worker last reported
            std::printf("  %3.0f%% %s", t.progress * 100, printable(t.progress_message).c_str());
        }
        std::printf("\n");
    };
    for (const auto& t : list.assigned) {
        row(t);
    }
    for (const auto& t : list.pending) {
        row(t);
    }
    for (const auto& t : list.delayed) {
        row(t);
    }
    std::printf(
        "%llu held by workers, %llu pending, %llu delayed",
        static_cast<unsigned long long>(list.assigned_total),
        static_cast<unsigned long long>(list.pending_total),
        static_cast<unsigned long long>(list.delayed_total)
    );
    if (list.truncated) {
        std::printf(" (lists cut at %zu each: --limit)", list.limit);
    }
    std::printf("\n");
}

void print_cluster(const cluster_target& t, const roles::cluster_snapshot& c) {
    std::printf(
        "cluster   %s%s, epoch %lld\n", t.hosts.c_str(), t.chroot.c_str(),
        static_cast<long long>(c.epoch)
    );
    if (!c.master) {
        std::printf("master    none (an election is under way, or no zkd runs)\n");
    } else if (!c.master->garbage.empty()) {
        std::printf("master    unreadable: %s\n", printable(c.master->garbage).c_str());
    } else {
        const auto& m = *c.master;
        std::printf(
            "master    %s (pid %lld on %s), epoch %lld, since %s", printable(m.id).c_str(),
            static_cast<long long>(m.pid), printable(m.host).c_str(),
            static_cast<long long>(m.epoch), m.since_ms > 0 ? local_time(m.since_ms).c_str() : "?"
        );
        if (m.throughput) {
            std::printf(", %.2f tasks/s over the last minute", *m.throughput);
        }
        std::printf("\n");
    }
    std::printf(
        "queue     %llu pending, %llu delayed, %llu results not consumed%s, %llu cancel requests",
        static_cast<unsigned long long>(c.pending), static_cast<unsigned long long>(c.delayed),
        static_cast<unsigned long long>(c.results),
        c.uncounted_result_dirs > 0
            ? (" (in the result shards; not counted: " + std::to_string(c.uncounted_result_dirs) +
               " clients' directories)")
                  .c_str()
            : "",
        static_cast<unsigned long long>(c.cancel_requests)
    );
    if (c.master && c.master->max_pending.value_or(0) > 0) {
        std::printf("; bound %lld pending", static_cast<long long>(*c.master->max_pending));
    }
    if (c.master && c.master->garbage.empty() && !c.master->direct) {
        std::printf("; every task through the master (zkd run --no-direct)");
    }
    std::printf("\n");
    std::size_t slots = 0;
    std::size_t held = 0;
    for (const auto& w : c.workers) {
        slots += static_cast<std::size_t>(w.capacity);
        held += w.assigned;
    }
    std::printf("workers   %zu, %zu of %zu slots in use\n", c.workers.size(), held, slots);
    if (c.workers.empty()) {
        return;
    }
    std::printf(
        "  %-28s %-16s %7s %7s %7s  %s\n", "ID", "HOST", "LOAD", "RUNNING", "THREADS", "TYPES"
    );
    for (const auto& w : c.workers) {
        if (!w.garbage.empty()) {
            std::printf(
                "  %-28s (garbage: %s)\n", printable(w.id).c_str(), printable(w.garbage).c_str()
            );
            continue;
        }
        const std::string load = std::to_string(w.assigned) + "/" + std::to_string(w.capacity);
        const std::string threads = w.threads ? std::to_string(*w.threads) : "-";
        std::string notes = w.draining ? "  (draining)" : "";
        if (w.suspect) {
            notes += "  (suspect: left assignments unstarted; gets only a probe)";
        }
        if (!w.unhealthy.empty()) {
            notes += "  (unhealthy: " + joined(w.unhealthy) + ")";
        }
        if (!w.ignored.empty()) {
            notes += "  (ignored: " + w.ignored + ")";
        }
        std::printf(
            "  %-28s %-16s %7s %7zu %7s  %s%s\n", printable(w.id).c_str(),
            printable(w.host).c_str(), load.c_str(), w.running, threads.c_str(),
            printable(joined(w.types)).c_str(), printable(notes).c_str()
        );
    }
}

}  // namespace

int cmd_tasks(int argc, char** argv) {
    const auto a =
        args::parse(argc, argv, 2, cluster_options({{"--json", false, false}, {"--limit"}}));
    if (a.has("--help")) {
        std::fputs(tasks_help, stdout);
        return exit_ok;
    }
    if (!a.positional.empty()) {
        throw usage_error("unexpected argument '" + a.positional.front() + "'");
    }
    const auto limit = static_cast<std::size_t>(a.number("--limit", 1000, 1, 1'000'000));
    const bool as_json = a.has("--json");
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            auto list = co_await roles::list_tasks(zk, l, limit);
            if (!list) {
                complain("cannot list tasks: " + list.error().message());
                co_return exit_failed;
            }
            if (as_json) {
                std::printf("%s\n", protocol::to_text(roles::to_json(*list)).c_str());
            } else {
                print_tasks(*list);
            }
            co_return exit_ok;
        }
    );
}

int cmd_cluster(int argc, char** argv) {
    const auto a = args::parse(argc, argv, 2, cluster_options({{"--json", false, false}}));
    if (a.has("--help")) {
        std::fputs(cluster_help, stdout);
        return exit_ok;
    }
    if (!a.positional.empty()) {
        throw usage_error("unexpected argument '" + a.positional.front() + "'");
    }
    const bool as_json = a.has("--json");
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            auto view = co_await roles::read_cluster(zk, l);
            if (!view) {
                complain("cannot read the cluster: " + view.error().message());
                co_return exit_failed;
            }
            if (as_json) {
                std::printf("%s\n", protocol::to_text(roles::to_json(*view)).c_str());
            } else {
                print_cluster(target, *view);
            }
            co_return exit_ok;
        }
    );
}

}  // namespace zkd::cli
