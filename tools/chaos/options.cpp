// SPDX-License-Identifier: MIT
#include "chaos/options.hpp"

#include "protocol/syntax.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace zkd::chaos {

namespace {

template <class T>
T number(const std::string& flag, const std::string& v, T lo, T hi) {
    T out{};
    const auto* end = v.data() + v.size();
    auto [p, ec] = std::from_chars(v.data(), end, out);
    if (ec != std::errc{} || p != end || out < lo || out > hi) {
        throw usage_error(
            flag + " wants a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
            ", not '" + v + "'"
        );
    }
    return out;
}

std::chrono::milliseconds duration(
    const std::string& flag, const std::string& v, std::chrono::milliseconds lo
) {
    auto d = parse_duration(v);
    if (!d) {
        throw usage_error(
            flag + " wants a duration with a unit (500ms, 6s, 2m, 2m30s), not '" + v + "'"
        );
    }
    if (*d < lo) {
        throw usage_error(
            flag + " wants at least " + std::to_string(lo.count()) + "ms, not '" + v + "'"
        );
    }
    return *d;
}

std::vector<fault_kind> kinds_of(const std::string& v) {
    std::vector<fault_kind> out;
    if (v == "none") {
        return out;
    }
    std::size_t from = 0;
    while (from <= v.size()) {
        const auto comma = v.find(',', from);
        const auto part =
            v.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
        if (part == "all") {
            out.insert(out.end(), std::begin(all_fault_kinds), std::end(all_fault_kinds));
        } else if (auto k = parse_fault_kind(part)) {
            out.push_back(*k);
        } else {
            throw usage_error(
                "--faults: unknown fault '" + part +
                "' (zkd-kill, zkd-pause, master-kill, zk-kill, zk-pause, "
                "zkd-partition, all, none)"
            );
        }
        if (comma == std::string::npos) {
            break;
        }
        from = comma + 1;
    }
    return out;
}

workloads workloads_of(const std::string& v) {
    workloads w;
    w.echo = false;
    std::size_t from = 0;
    while (from <= v.size()) {
        const auto comma = v.find(',', from);
        const auto part =
            v.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
        if (part == "echo") {
            w.echo = true;
        } else if (part == "delayed") {
            w.delayed = true;
        } else if (part == "schedules") {
            w.schedules = true;
        } else if (part == "workflows") {
            w.workflows = true;
        } else if (part == "jobs" || part == "all") {
            w.delayed = w.schedules = w.workflows = true;
            w.echo = w.echo || part == "all";
        } else {
            throw usage_error(
                "--workload: unknown workload '" + part +
                "' (echo, delayed, schedules, workflows, jobs, all)"
            );
        }
        if (comma == std::string::npos) {
            break;
        }
        from = comma + 1;
    }
    if (!w.echo && !w.jobs()) {
        throw usage_error("--workload wants at least one workload");
    }
    return w;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(const std::string& text) {
    if (text.find_first_not_of("0123456789") == std::string::npos) {
        return std::nullopt;  // a unit is required here
    }
    return protocol::parse_duration(text);
}

parsed_args parse_args(const std::vector<std::string>& args) {
    parsed_args out;
    settings& s = out.s;
    std::string explicit_kinds;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string flag = args[i];
        std::optional<std::string> inline_value;
        if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
            inline_value = flag.substr(eq + 1);
            flag.resize(eq);
        }
        if (flag == "--help" || flag == "-h") {
            out.help = true;
            continue;
        }
        if (flag == "--json") {
            s.json = true;
            continue;
        }
        if (flag == "--clean-on-pass") {
            s.clean_on_pass = true;
            continue;
        }
        if (flag == "--partitions") {
            s.partitions = true;
            continue;
        }
        const auto value = [&]() -> std::string {
            if (inline_value) {
                return *inline_value;
            }
            if (i + 1 >= args.size()) {
                throw usage_error(flag + " wants a value");
            }
            return args[++i];
        };
        if (flag == "--seed") {
            s.seed =
                number<std::uint64_t>(flag, value(), 0, std::numeric_limits<std::uint64_t>::max());
        } else if (flag == "--duration") {
            s.duration = duration(flag, value(), std::chrono::seconds(1));
        } else if (flag == "--rate") {
            const auto v = value();
            try {
                std::size_t used = 0;
                s.rate = std::stod(v, &used);
                if (used != v.size() || !std::isfinite(s.rate) || s.rate <= 0 || s.rate > 100'000) {
                    throw std::invalid_argument(v);
                }
            } catch (const std::exception&) {
                throw usage_error(
                    "--rate wants tasks per second, more than 0 and at most 100000, not '" + v + "'"
                );
            }
        } else if (flag == "--workload") {
            s.work = workloads_of(value());
        } else if (flag == "--every") {
            s.every = duration(flag, value(), std::chrono::milliseconds(100));
        } else if (flag == "--faults") {
            explicit_kinds = value();
            s.kinds = kinds_of(explicit_kinds);
        } else if (flag == "--zkd-count") {
            s.zkd_count = number<int>(flag, value(), 1, 64);
        } else if (flag == "--capacity") {
            s.capacity = number<int>(flag, value(), 1, 1024);
        } else if (flag == "--session-timeout") {
            s.session_timeout = duration(flag, value(), std::chrono::milliseconds(400));
        } else if (flag == "--settle") {
            s.settle = duration(flag, value(), std::chrono::seconds(1));
        } else if (flag == "--pause-max") {
            s.pause_max = duration(flag, value(), std::chrono::seconds(1));
        } else if (flag == "--max-attempts") {
            s.max_attempts = number<int>(flag, value(), 1, 100);
        } else if (flag == "--auto-bundle") {
            s.auto_bundle = number<std::size_t>(flag, value(), 1, 1'000);
        } else if (flag == "--zkd") {
            s.zkd_binary = value();
        } else if (flag == "--zk-dir") {
            s.zk_dir = value();
        } else if (flag == "--dir") {
            s.dir = value();
        } else if (flag == "--namespace") {
            s.ns = value();
            if (s.ns.empty() || s.ns.find('/') != std::string::npos) {
                throw usage_error("--namespace wants a name without '/'");
            }
        } else {
            throw usage_error("unknown argument '" + args[i] + "'");
        }
    }
    const bool partition_asked =
        std::find(s.kinds.begin(), s.kinds.end(), fault_kind::zkd_partition) != s.kinds.end();
    if (partition_asked && !s.partitions) {
        throw usage_error("--faults zkd-partition needs --partitions");
    }
    if (s.partitions && !partition_asked && explicit_kinds.empty()) {
        s.kinds.push_back(fault_kind::zkd_partition);
    }
    if (s.partitions && !s.zk_dir.empty()) {
        throw usage_error(
            "--partitions needs an ensemble of its own (not --zk-dir): the zkds "
            "reach it over veth links, and an attached one listens on loopback only"
        );
    }
    return out;
}

const char* help_text() noexcept {
    return R"(zkd-chaos: run a zkd cluster under faults and check that no task is lost,
duplicated or wrong.

Starts a 3-member ZooKeeper ensemble on loopback (or attaches to one), N `zkd run`
processes with a short session timeout, drives an open-loop load of `echo` tasks whose
args are unique per task, and injects a seeded schedule of faults: SIGKILL or SIGSTOP of a
zkd, SIGKILL of the acting master, SIGKILL (then restart) or SIGSTOP of one ZooKeeper
member. Then it stops the faults, lets the cluster settle and checks: every task got
exactly one result, succeeded, with its own args back; nothing is left in /pending,
/assign/<worker> or /results; no zkd ended other than as chaos made it (or logged a
sanitizer or abort report). It prints the faults as they happen, a per-fault timeline,
the longest stall and a verdict.

Usage: zkd-chaos [options]
  --seed N             the fault schedule's seed (default: random, printed)
  --duration DUR       how long the load runs (default 150s)
  --rate R             tasks per second, open loop (default 200)
  --workload LIST      comma-separated, what runs while the faults do (default echo):
                         echo       the open loop of echo tasks (--rate)
                         delayed    delayed tasks (due 0.3-3s after their submit, ~12/s),
                                    a quarter failing on purpose with 2 retries: each must
                                    start no earlier than due, end once, retry as asked
                         schedules  three schedules every 1s (misfire all, once, skip):
                                    every due time decided once, each firing run once,
                                    none missed under all, the last one fired under once
                         workflows  every 4s a chain, a map fan-out/fan-in and a DAG:
                                    each step launched once, the fan-in once, each
                                    workflow succeeded with the result it must have
                         jobs       delayed,schedules,workflows;  all: echo and jobs
                       Jobs tasks run as the exec type chaos-step (<run dir>/chaos-step.sh,
                       which logs every start of a task to <run dir>/starts.log)
  --every DUR          mean time between faults; each gap is 0.5 to 1.5 times it (default 6s)
  --faults LIST        comma-separated: zkd-kill, zkd-pause, master-kill, zk-kill, zk-pause,
                       zkd-partition (with --partitions), all (default: the first five), none
  --partitions         (root) run each zkd in a network namespace of its own, linked to the
                       ensemble by a veth pair, and add zkd-partition faults: the link goes
                       down for 1s to --pause-max, then up
  --zkd-count N        `zkd run` processes (default 4)
  --capacity N         task slots per zkd (default 2)
  --session-timeout DUR   the zkds' ZooKeeper session timeout (default 4s)
  --pause-max DUR      longest SIGSTOP (default 8s; pauses are 1s to it)
  --max-attempts N     each task's max_attempts (default 10)
  --auto-bundle N      the echo load's client packs the tasks of submit calls that come
                       while its transaction is in flight into bundles of up to N
                       (docs/protocol.md 4.1 "Automatic bundles"); default 64, the
                       client's; 1: off
  --settle DUR         after the load, how long to wait for the last results (default 60s)
  --zkd PATH           the zkd program (default: next to zkd-chaos, then the build tree's
                       src/zkd, then zkd on PATH)
  --zk-dir DIR         attach to the ensemble `zkd-zk-local start --servers 3 --dir DIR`
                       started (ZooKeeper faults still hit its members; it is left running)
  --dir DIR            run directory: zkd logs, ZooKeeper data and logs (default: a new
                       directory under $TMPDIR; kept, and printed)
  --clean-on-pass      remove the run directory when every invariant held
  --namespace NS       the cluster's namespace (default chaos; it must not be in use)
  --json               print the report as JSON on stdout (the text goes to stderr)
  --help               this text
  --version            the version

Durations take a unit: 500ms, 6s, 2m.
Exit codes: 0 every invariant held, 1 a violation (listed), 2 usage error, 3 the run could
not be carried out (ZooKeeper or zkd did not start).
)";
}

}  // namespace zkd::chaos
