// SPDX-License-Identifier: MIT
// Exec types' resource limits (docs/exec.md "Limits"), the pure parts: how each limit is
// enforced on this worker (cgroup v2 or rlimits), the start-up line that says so, and what the
// end of a run says about a limit it went over.
#include "handlers/exec.hpp"

#include <algorithm>
#include <csignal>
#include <string>

namespace zkd::handlers::exec {

namespace {

std::string bytes_text(std::size_t n) {
    constexpr std::size_t mib = std::size_t{1024} * 1024;
    if (n % (1024 * mib) == 0) {
        return std::to_string(n / (1024 * mib)) + "GiB";
    }
    if (n % mib == 0) {
        return std::to_string(n / mib) + "MiB";
    }
    if (n % 1024 == 0) {
        return std::to_string(n / 1024) + "KiB";
    }
    return std::to_string(n) + " bytes";
}

std::string ms_text(std::chrono::milliseconds d) {
    return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                                 : std::to_string(d.count()) + "ms";
}

protocol::task_error limit_error(
    std::string_view code, std::string message, std::string_view tail
) {
    std::string t(tail);
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) {
        t.pop_back();
    }
    if (!t.empty()) {
        message += "; stderr: " + t;
    }
    return protocol::task_error{std::string(code), std::move(message)};
}

bool mentions(std::string_view text, std::initializer_list<std::string_view> needles) {
    return std::ranges::any_of(needles, [text](std::string_view n) {
        return text.find(n) != std::string_view::npos;
    });
}

}  // namespace

limit_plan plan_limits(const resource_limits& l, const cgroup_support& cg, bool has_user) {
    limit_plan p;
    const bool use = cg.usable;
    if (l.memory > 0) {
        p.memory = use && cg.memory ? enforcement::cgroup : enforcement::rlimit;
    }
    if (l.cpu_time.count() > 0) {
        p.cpu_time = enforcement::rlimit;
    }
    if (l.cpu_percent > 0 && use && cg.cpu) {
        p.cpu_share = enforcement::cgroup;
    }
    if (l.max_processes > 0) {
        p.processes = use && cg.pids ? enforcement::cgroup
                      : has_user     ? enforcement::rlimit
                                     : enforcement::none;
    }
    if (l.max_open_files > 0) {
        p.open_files = enforcement::rlimit;
    }
    return p;
}

std::string describe_limits(const resource_limits& l, const limit_plan& p) {
    if (!l.any()) {
        return "no limits";
    }
    std::string out;
    const auto add = [&out](const std::string& what) {
        out += out.empty() ? "" : ", ";
        out += what;
    };
    if (l.memory > 0) {
        add("memory " + bytes_text(l.memory) +
            (p.memory == enforcement::cgroup ? " (cgroup memory.max, the program's tree)"
                                             : " (RLIMIT_DATA, each process)"));
    }
    if (l.cpu_time.count() > 0) {
        add("CPU time " + ms_text(l.cpu_time) + " (RLIMIT_CPU, each process)");
    }
    if (l.cpu_percent > 0) {
        add("CPU share " + std::to_string(l.cpu_percent) + "% of a core" +
            (p.cpu_share == enforcement::cgroup
                 ? std::string(" (cgroup cpu.max, the program's tree)")
                 : std::string(" NOT IN FORCE (needs cgroup v2's cpu controller)")));
    }
    if (l.max_processes > 0) {
        add("processes " + std::to_string(l.max_processes) +
            (p.processes == enforcement::cgroup ? " (cgroup pids.max, the program's tree)"
             : p.processes == enforcement::rlimit
                 ? " (RLIMIT_NPROC: every process of the type's user on this machine)"
                 : " NOT IN FORCE (needs cgroup v2's pids controller, or a user: RLIMIT_NPROC "
                   "does not hold for root)"));
    }
    if (l.max_open_files > 0) {
        add("open files " + std::to_string(l.max_open_files) + " (RLIMIT_NOFILE, each process)");
    }
    return out;
}

std::optional<protocol::task_error> limit_exceeded(
    const resource_limits& l, const limit_plan& p, const limit_evidence& e
) {
    if (e.signal == 0 && e.exit_code == 0) {
        return std::nullopt;  // whatever it met, it coped
    }
    const std::string_view tail = e.stderr_tail;
    if (p.memory == enforcement::cgroup && e.oom_kills > 0) {
        return limit_error(
            protocol::codes::memory_limit,
            "the program went over its memory-limit of " + bytes_text(l.memory) +
                " (cgroup memory.max): the kernel's OOM killer ended it",
            tail
        );
    }
    if (p.cpu_time != enforcement::none) {
        const bool xcpu = e.signal == SIGXCPU;
        const bool used_up = e.signal == SIGKILL && !e.stopped && e.cpu_used >= l.cpu_time;
        if (xcpu || used_up) {
            return limit_error(
                protocol::codes::cpu_limit,
                "the program used up its cpu-limit of " + ms_text(l.cpu_time) +
                    " of CPU time (RLIMIT_CPU): killed by " +
                    (xcpu ? std::string("SIGXCPU") : std::string("SIGKILL")),
                tail
            );
        }
    }
    if (p.processes == enforcement::cgroup && e.pids_max > 0) {
        return limit_error(
            protocol::codes::process_limit,
            "the program failed after " + std::to_string(e.pids_max) +
                " of its forks were refused at max-processes " + std::to_string(l.max_processes) +
                " (cgroup pids.max)",
            tail
        );
    }
    if (e.stopped) {
        return std::nullopt;
    }
    if (p.memory == enforcement::rlimit &&
        mentions(
            tail, {"MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory",
                   "Out of memory"}
        )) {
        return limit_error(
            protocol::codes::memory_limit,
            "the program failed with a memory-limit of " + bytes_text(l.memory) +
                " in force (RLIMIT_DATA) and its stderr reports an allocation failure",
            tail
        );
    }
    if (p.open_files == enforcement::rlimit && mentions(tail, {"Too many open files"})) {
        return limit_error(
            protocol::codes::open_files_limit,
            "the program failed with max-open-files " + std::to_string(l.max_open_files) +
                " in force (RLIMIT_NOFILE) and its stderr reports too many open files",
            tail
        );
    }
    if (p.processes == enforcement::rlimit &&
        mentions(tail, {"Resource temporarily unavailable"})) {
        return limit_error(
            protocol::codes::process_limit,
            "the program failed with max-processes " + std::to_string(l.max_processes) +
                " in force (RLIMIT_NPROC) and its stderr reports a refused fork",
            tail
        );
    }
    return std::nullopt;
}

}  // namespace zkd::handlers::exec
