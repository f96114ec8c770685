// SPDX-License-Identifier: MIT
// Exec types' cgroup v2 (docs/exec.md "Limits"): finding a subtree the worker may use and
// preparing it (detect_cgroup), and one program's cgroup (detail::program_cgroup).
#include "handlers/exec/detail/cgroup.hpp"

#include "handlers/exec.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

namespace zkd::handlers::exec {

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

/// Writes `value` into the cgroup file `path`; an empty string, or why it failed.
std::string write_text(const std::string& path, const std::string& value) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return path + ": " + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
    }
    const auto n = ::write(fd, value.data(), value.size());
    const int saved = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(value.size())) {
        return "writing '" + value + "' to " + path + ": " +
               std::strerror(saved);  // NOLINT(concurrency-mt-unsafe)
    }
    return {};
}

/// Where cgroup v2 is mounted (from /proc/self/mountinfo), or empty.
std::string cgroup2_mount() {
    std::istringstream in(read_text("/proc/self/mountinfo"));
    for (std::string line; std::getline(in, line);) {
        const auto dash = line.find(" - ");
        if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) {
            continue;
        }
        std::istringstream fields(line.substr(0, dash));
        std::string id;
        std::string parent;
        std::string dev;
        std::string root;
        std::string point;
        if (fields >> id >> parent >> dev >> root >> point && root == "/") {
            return point;
        }
    }
    return {};
}

/// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup), or empty.
std::string own_cgroup() {
    std::istringstream in(read_text("/proc/self/cgroup"));
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("0::", 0) == 0) {
            return line.substr(3);
        }
    }
    return {};
}

bool has_word(const std::string& text, std::string_view word) {
    std::istringstream in(text);
    for (std::string w; in >> w;) {
        if (w == word) {
            return true;
        }
    }
    return false;
}

bool delegated(const std::string& dir) {
    const std::array<const char*, 2> marks{"trusted.delegate", "user.delegate"};
    return std::ranges::any_of(marks, [&dir](const char* attr) {
        return ::getxattr(dir.c_str(), attr, nullptr, 0) >= 0;
    });
}

/// Removes the programs' cgroups a zkd that is gone left in `dir` (killed with SIGKILL, it
/// could not): `prog-<pid>-<n>` whose pid is no process.
void remove_stale(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (!e.is_directory() || name.rfind("prog-", 0) != 0) {
            continue;
        }
        const auto dash = name.find('-', 5);
        const std::string pid = name.substr(5, dash == std::string::npos ? 0 : dash - 5);
        if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ||
            pid.size() > 9 || ::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 ||
            errno != ESRCH) {
            continue;
        }
        [[maybe_unused]] auto killed = write_text(e.path().string() + "/cgroup.kill", "1");
        if (::rmdir(e.path().c_str()) == 0) {
            spdlog::info(
                "zkd: exec limits: removed {}, left by a zkd that is gone", e.path().string()
            );
        }
    }
}

cgroup_support refuse(std::string why) {
    cgroup_support s;
    s.reason = std::move(why);
    return s;
}

}  // namespace

cgroup_support detect_cgroup(limits_mode mode) {
    if (mode == limits_mode::rlimit) {
        return refuse("--exec-limits rlimit");
    }
    const std::string mount = cgroup2_mount();
    if (mount.empty()) {
        return refuse("no cgroup v2 hierarchy is mounted");
    }
    const std::string own = own_cgroup();
    if (own.empty() || own.front() != '/') {
        return refuse("this process is in no cgroup v2 group (/proc/self/cgroup)");
    }
    const bool root = own == "/";
    const std::string dir = root ? mount : mount + own;
    const std::string offered = read_text(dir + "/cgroup.controllers");
    if (!has_word(offered, "memory") && !has_word(offered, "cpu") && !has_word(offered, "pids")) {
        return refuse(
            "its cgroup " + dir +
            " offers none of the memory, cpu and pids controllers (bound to cgroup v1?)"
        );
    }
    if (mode == limits_mode::automatic && !root && !delegated(dir)) {
        return refuse(
            "its cgroup " + dir +
            " is not delegated to it (systemd: Delegate=yes; --exec-limits cgroup uses it anyway)"
        );
    }
    if (::access(dir.c_str(), W_OK) != 0 ||
        ::access((dir + "/cgroup.subtree_control").c_str(), W_OK) != 0) {
        return refuse("its cgroup " + dir + " is not writable by it");
    }
    // No internal processes: controllers are enabled below a cgroup only while no process is
    // in it, so the worker moves into a leaf of its own first.
    const std::string self = std::to_string(::getpid());
    if (!root) {
        const std::string leaf = dir + "/zkd";
        if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
            return refuse(
                "cannot make " + leaf + ": " +
                std::strerror(errno)  // NOLINT(concurrency-mt-unsafe)
            );
        }
        if (auto e = write_text(leaf + "/cgroup.procs", self); !e.empty()) {
            return refuse("cannot move into " + leaf + ": " + e);
        }
    }
    std::string enable;
    for (const char* c : {"memory", "cpu", "pids"}) {
        if (has_word(offered, c)) {
            enable += std::string(enable.empty() ? "+" : " +") + c;
        }
    }
    if (auto e = write_text(dir + "/cgroup.subtree_control", enable); !e.empty()) {
        if (!root) {
            [[maybe_unused]] auto back = write_text(dir + "/cgroup.procs", self);
            ::rmdir((dir + "/zkd").c_str());
        }
        return refuse(
            "cannot enable its controllers: " + e +
            (root ? "" : " (other processes share its cgroup: give zkd one of its own)")
        );
    }
    remove_stale(dir);
    const std::string enabled = read_text(dir + "/cgroup.subtree_control");
    cgroup_support s;
    s.usable = true;
    s.path = dir;
    s.memory = has_word(enabled, "memory");
    s.cpu = has_word(enabled, "cpu");
    s.pids = has_word(enabled, "pids");
    return s;
}

namespace detail {

namespace {

std::uint64_t counter_in(const std::string& file, std::string_view key) {
    std::istringstream in(read_text(file));
    std::string k;
    std::uint64_t v = 0;
    while (in >> k >> v) {
        if (k == key) {
            return v;
        }
    }
    return 0;
}

}  // namespace

std::unique_ptr<program_cgroup> program_cgroup::make(const program& p, std::string& error) {
    static std::atomic<std::uint64_t> next{1};
    const std::string dir = p.cgroup_parent + "/prog-" + std::to_string(::getpid()) + "-" +
                            std::to_string(next.fetch_add(1));
    if (::mkdir(dir.c_str(), 0755) != 0) {
        error = "cannot make its cgroup " + dir + ": " +
                std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    std::unique_ptr<program_cgroup> cg(new program_cgroup(dir));
    const auto& l = p.config.limits;
    std::string e;
    if (p.plan.memory == enforcement::cgroup) {
        e = write_text(dir + "/memory.max", std::to_string(l.memory));
        // Over the limit means OOM, not swap; and the OOM killer takes the whole tree.
        [[maybe_unused]] auto swap = write_text(dir + "/memory.swap.max", "0");
        [[maybe_unused]] auto group = write_text(dir + "/memory.oom.group", "1");
    }
    if (e.empty() && p.plan.cpu_share == enforcement::cgroup) {
        e = write_text(dir + "/cpu.max", std::to_string(l.cpu_percent * 1000) + " 100000");
    }
    if (e.empty() && p.plan.processes == enforcement::cgroup) {
        e = write_text(dir + "/pids.max", std::to_string(l.max_processes));
    }
    if (e.empty()) {
        cg->procs_ = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
        if (cg->procs_ < 0) {
            e = dir + "/cgroup.procs: " + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
        }
        cg->kill_ = ::open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
    }
    if (!e.empty()) {
        error = "cannot set up its cgroup: " + e;
        return nullptr;  // the destructor removes it
    }
    return cg;
}

program_cgroup::~program_cgroup() {
    if (kill_ >= 0) {
        [[maybe_unused]] const auto n = ::write(kill_, "1", 1);
        ::close(kill_);
    }
    if (procs_ >= 0) {
        ::close(procs_);
    }
    // Its processes are gone (the supervisor waited for them); the kernel may take a moment
    // to notice the last one.
    for (int i = 0; i < 100; ++i) {
        if (::rmdir(dir_.c_str()) == 0 || errno != EBUSY) {
            return;
        }
        const timespec pause{0, 1'000'000};
        ::nanosleep(&pause, nullptr);
    }
    spdlog::warn("exec: cannot remove the cgroup {}: it is still busy", dir_);
}

std::uint64_t program_cgroup::oom_kills() const {
    return counter_in(dir_ + "/memory.events", "oom_kill");
}

std::uint64_t program_cgroup::pids_refused() const {
    return counter_in(dir_ + "/pids.events", "max");
}

}  // namespace detail

}  // namespace zkd::handlers::exec
