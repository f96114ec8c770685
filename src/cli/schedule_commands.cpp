// SPDX-License-Identifier: MIT
// zkd schedule add | list | show | rm | pause | resume: recurring schedules
// (docs/schedules.md), through the client side of src/roles/schedule.
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "protocol/delay.hpp"
#include "protocol/task.hpp"
#include "roles/schedule/client.hpp"
#include "roles/schedule/zones.hpp"
#include "schedule/firing.hpp"
#include "schedule/spec.hpp"

#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
namespace sc = zkd::schedule;
using namespace std::chrono_literals;

namespace zkd::cli {

namespace {

constexpr const char* schedule_help =
    R"(usage: zkd schedule add NAME (--every DUR | --cron "m h dom mon dow" [--tz ZONE])
                          TYPE [ARGS-JSON | @FILE] [options]
       zkd schedule list [--json]
       zkd schedule show NAME [--json]
       zkd schedule rm NAME
       zkd schedule pause NAME
       zkd schedule resume NAME

Recurring schedules: each due time submits one ordinary task, fired by the elected master
exactly once across failovers (docs/schedules.md). NAME is 1 to 64 characters of
A-Z a-z 0-9 _ . - (not starting with '.').

  add       stores a schedule; it first fires one period after now (--every), or at the
            next minute its cron expression matches (read in --tz). Refused, with nothing
            stored: a bad name, expression or option, or a NAME that exists.
  list      every schedule: name, when, type, state, next due time, firings so far
            (--json: {"schedules":[...]}, as GET /v1/schedules, each an object with name,
            next_ms (absent while paused), fired, skipped, missed, ...; a node that is
            garbage {"name":..,"garbage":why}).
  show      one schedule in full.
  rm        removes it (tasks it fired run on).
  pause     stops its firings; resume starts them again, applying the misfire policy to
            the due times that passed meanwhile.

Options of add:
  --every DUR             fire every DUR (1s to 366d; 90s, 5m, 2h, a bare number is ms)
  --cron EXPR             fire at the minutes EXPR matches: minute hour day-of-month month
                          day-of-week, with *, lists, ranges, /steps, jan-dec, sun-sat, or
                          @hourly, @daily, @weekly, @monthly, @yearly
  --tz ZONE               the zone EXPR is read in (default UTC): a tz database name such
                          as Europe/Paris, from the master's /usr/share/zoneinfo (tzdata).
                          A local time skipped by a clock set forward fires at the jump; one
                          repeated by a clock set back fires once (the first time)
  --misfire POLICY        due times missed while no master fired them (cluster down,
                          paused): once (default: fire the latest once), skip (fire none),
                          all (fire each, up to 100)
  --no-overlap            skip a due time while the previous firing's task has no result
  --paused                store it paused
  --priority P            its tasks' priority, 0 (lowest) to 9 (highest), default 5
  --task-timeout DUR      its tasks' handler time limit (default none)
  --max-attempts N        runs allowed if workers die (default 3)
  --retries N             retry a failed try up to N times (0 to 100; default: the
                          workers' default for TYPE)
  --json                  print the stored schedule as JSON

Exit codes: 0 done; 1 refused or failed (a NAME that exists, a garbage schedule); 2 usage;
3 ZooKeeper unreachable; 5 no such schedule.
)";

int code_of(const roles::schedule_error& e) {
    return e.what == roles::schedule_error::kind::not_found ? exit_not_found : exit_failed;
}

std::string when_of(const sc::schedule& s) {
    if (s.every_ms > 0) {
        return "every " + std::to_string(s.every_ms) + "ms";
    }
    return "cron \"" + s.cron + "\" " + s.tz;
}

std::string time_or_dash(std::optional<std::int64_t> ms) {
    return ms ? protocol::format_time(*ms) : std::string("-");
}

std::optional<std::int64_t> next_of(const sc::schedule& s) {
    if (s.paused) {
        return std::nullopt;
    }
    return sc::next_due(s, s.last_due_ms);
}

void print_one(const sc::schedule& s, bool as_json) {
    if (as_json) {
        std::printf("%s\n", protocol::to_text(sc::to_json(s)).c_str());
        return;
    }
    std::printf("name:          %s\n", printable(s.name).c_str());
    std::printf("when:          %s\n", printable(when_of(s)).c_str());
    std::printf(
        "task:          %s %s\n", printable(s.type).c_str(),
        printable(protocol::to_text(s.args)).c_str()
    );
    std::printf(
        "options:       priority %d, task timeout %lldms, max attempts %d, retries %s\n",
        s.priority, static_cast<long long>(s.timeout_ms), s.max_attempts,
        s.retries ? std::to_string(*s.retries).c_str() : "workers' default"
    );
    std::printf(
        "misfire:       %s%s\n", std::string(sc::to_string(s.misfire)).c_str(),
        s.no_overlap ? ", no overlap" : ""
    );
    std::printf("state:         %s\n", s.paused ? "paused" : "active");
    std::printf("created:       %s\n", protocol::format_time(s.created_ms).c_str());
    std::printf(
        "last due:      %s\n",
        s.last_due_ms > s.created_ms ? protocol::format_time(s.last_due_ms).c_str() : "-"
    );
    std::printf(
        "last fired:    %s%s\n",
        time_or_dash(s.last_fired_ms > 0 ? std::optional(s.last_fired_ms) : std::nullopt).c_str(),
        s.last_fired_ms > 0
            ? (" (task " + sc::firing_task_id(s.client, s.priority, s.last_fired_ms) + ")").c_str()
            : ""
    );
    std::printf("next due:      %s\n", time_or_dash(next_of(s)).c_str());
    std::printf(
        "fired:         %llu (skipped %llu for overlap, missed %llu)\n",
        static_cast<unsigned long long>(s.fired), static_cast<unsigned long long>(s.skipped),
        static_cast<unsigned long long>(s.missed)
    );
    std::printf("results:       /results/%s\n", s.client.c_str());
}

std::string one_name(const args& a, const char* sub) {
    if (a.positional.size() != 2) {
        throw usage_error(std::string("schedule ") + sub + " wants one schedule NAME");
    }
    return a.positional[1];
}

std::string read_args_text(const std::string& arg) {
    if (arg.empty() || arg[0] != '@') {
        return arg;
    }
    std::ifstream in(arg.substr(1), std::ios::binary);
    if (!in) {
        throw usage_error("cannot read the args file '" + arg.substr(1) + "'");
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int cmd_add(const args& a) {
    if (a.positional.size() < 3 || a.positional.size() > 4) {
        throw usage_error("schedule add wants NAME (--every DUR | --cron EXPR) TYPE [ARGS-JSON]");
    }
    json::object req;
    req["name"] = a.positional[1];
    if (!sc::is_valid_name(a.positional[1])) {
        throw usage_error(
            "'" + a.positional[1] +
            "' is not a valid schedule name (1-64 of A-Z a-z 0-9 _ . -, not starting with '.')"
        );
    }
    if (a.has("--every") == a.has("--cron")) {
        throw usage_error("schedule add wants exactly one of --every DUR and --cron EXPR");
    }
    if (a.has("--every")) {
        if (a.has("--tz")) {
            throw usage_error("--tz goes with --cron only");
        }
        req["every_ms"] = a.duration(
                               "--every", 0ms, std::chrono::milliseconds(sc::min_every_ms),
                               std::chrono::milliseconds(sc::max_every_ms)
        )
                              .count();
    } else {
        req["cron"] = *a.value("--cron");
        req["tz"] = a.get("--tz", "UTC");
    }
    req["type"] = a.positional[2];
    if (a.positional.size() == 4) {
        boost::system::error_code ec;
        auto v = protocol::parse_json(read_args_text(a.positional[3]), ec);
        if (ec) {
            throw usage_error("ARGS-JSON is not JSON: " + ec.message());
        }
        req["args"] = std::move(v);
    }
    if (a.has("--priority")) {
        req["priority"] = a.number(
            "--priority", protocol::default_priority, protocol::min_priority, protocol::max_priority
        );
    }
    if (a.has("--task-timeout")) {
        req["timeout_ms"] = a.duration("--task-timeout", 0ms, 0ms, 24h * 365).count();
    }
    if (a.has("--max-attempts")) {
        req["max_attempts"] = a.number("--max-attempts", 3, 1, protocol::max_attempts_limit);
    }
    if (a.has("--retries")) {
        req["retries"] = a.number("--retries", 0, 0, protocol::max_retries_limit);
    }
    if (a.has("--misfire")) {
        req["misfire"] = *a.value("--misfire");
    }
    if (a.has("--no-overlap")) {
        req["no_overlap"] = true;
    }
    if (a.has("--paused")) {
        req["paused"] = true;
    }
    // Refuse a bad request before connecting, with its message.
    const json::value request(std::move(req));
    if (auto s = sc::parse_request(request, roles::system_zones()); !s) {
        complain("the schedule is refused: " + s.error().message + "; nothing was stored");
        return exit_failed;
    }
    const bool as_json = a.has("--json");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto s = co_await roles::add_schedule(zk, request);
            if (!s) {
                complain(
                    (s.error().what == roles::schedule_error::kind::invalid
                         ? "the schedule is refused: "
                         : std::string{}) +
                    s.error().message
                );
                co_return code_of(s.error());
            }
            if (as_json) {
                print_one(*s, true);
            } else {
                std::printf(
                    "schedule %s added; next due %s\n", s->name.c_str(),
                    time_or_dash(next_of(*s)).c_str()
                );
            }
            co_return exit_ok;
        }
    );
}

int cmd_list(const args& a) {
    if (a.positional.size() != 1) {
        throw usage_error("schedule list takes no argument");
    }
    const bool as_json = a.has("--json");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto all = co_await roles::list_schedules(zk);
            if (!all) {
                complain(all.error().message);
                co_return code_of(all.error());
            }
            if (as_json) {
                json::array out;
                for (const auto& s : all->schedules) {
                    out.push_back(sc::to_json(s));
                }
                for (const auto& [name, why] : all->garbage) {
                    out.push_back(json::object{{"name", name}, {"garbage", why}});
                }
                // The shape of GET /v1/schedules: one object, room to grow.
                const json::value doc = json::object{{"schedules", std::move(out)}};
                std::printf("%s\n", protocol::to_text(doc).c_str());
                co_return exit_ok;
            }
            for (const auto& s : all->schedules) {
                std::printf(
                    "%-24s %-28s %-16s %-7s next %-24s fired %llu\n", printable(s.name).c_str(),
                    printable(when_of(s)).c_str(), printable(s.type).c_str(),
                    s.paused ? "paused" : "active", time_or_dash(next_of(s)).c_str(),
                    static_cast<unsigned long long>(s.fired)
                );
            }
            for (const auto& [name, why] : all->garbage) {
                std::printf("%-24s garbage: %s\n", printable(name).c_str(), printable(why).c_str());
            }
            co_return exit_ok;
        }
    );
}

int cmd_show(const args& a) {
    const auto name = one_name(a, "show");
    const bool as_json = a.has("--json");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto s = co_await roles::read_schedule(zk, name);
            if (!s) {
                complain(s.error().message);
                co_return code_of(s.error());
            }
            print_one(*s, as_json);
            co_return exit_ok;
        }
    );
}

int cmd_rm(const args& a) {
    const auto name = one_name(a, "rm");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto r = co_await roles::remove_schedule(zk, name);
            if (!r) {
                complain(r.error().message);
                co_return code_of(r.error());
            }
            std::printf("schedule %s removed\n", name.c_str());
            co_return exit_ok;
        }
    );
}

int cmd_pause(const args& a, bool paused) {
    const auto name = one_name(a, paused ? "pause" : "resume");
    const bool as_json = a.has("--json");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto s = co_await roles::pause_schedule(zk, name, paused);
            if (!s) {
                complain(s.error().message);
                co_return code_of(s.error());
            }
            if (as_json) {
                print_one(*s, true);
            } else {
                std::printf("schedule %s %s\n", name.c_str(), paused ? "paused" : "resumed");
            }
            co_return exit_ok;
        }
    );
}

}  // namespace

int cmd_schedule(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2,
        cluster_options(
            {{"--every", true, false},
             {"--cron", true, false},
             {"--tz", true, false},
             {"--misfire", true, false},
             {"--no-overlap", false, false},
             {"--paused", false, false},
             {"--priority"},
             {"--task-timeout"},
             {"--max-attempts"},
             {"--retries"},
             {"--json", false, false}}
        )
    );
    if (a.has("--help")) {
        std::printf("%s\n%s", schedule_help, cluster_flags_help);
        return exit_ok;
    }
    const std::string sub = a.positional.empty() ? "" : a.positional[0];
    if (sub == "add") {
        return cmd_add(a);
    }
    if (sub == "list") {
        return cmd_list(a);
    }
    if (sub == "show") {
        return cmd_show(a);
    }
    if (sub == "rm") {
        return cmd_rm(a);
    }
    if (sub == "pause") {
        return cmd_pause(a, true);
    }
    if (sub == "resume") {
        return cmd_pause(a, false);
    }
    throw usage_error(
        sub.empty() ? "schedule wants add, list, show, rm, pause or resume"
                    : "unknown schedule command '" + sub + "' (add, list, show, rm, pause, resume)"
    );
}

}  // namespace zkd::cli
