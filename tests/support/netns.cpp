// SPDX-License-Identifier: MIT
#include "support/netns.hpp"

#include "support/processes.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/file.h>
#include <unistd.h>

namespace zkd::test {

namespace {

/// Where iproute2's `ip` is, or "" (run_command needs a path: it does not search PATH).
const std::string& ip_binary() {
    static const std::string path = [] {
        for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
            if (::access(p, X_OK) == 0) {
                return std::string(p);
            }
        }
        return std::string();
    }();
    return path;
}

/// Every namespace and host end we make carries the pid of the test process that made it.
constexpr const char* ns_prefix = "zkdt-";
constexpr const char* link_prefix = "zkt";
/// 10.231.0.0/16, cut into /30s: host end .1, inner end .2 of each.
constexpr int net_a = 10;
constexpr int net_b = 231;
constexpr int max_blocks = 16384;

bool alive(long pid) {
    return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) {
            out.push_back(line);
        }
    }
    return out;
}

/// The pid in "zkdt-<pid>-<n>" / "zkt<hex pid>h<n>", or -1 for a name that is not ours.
long owner_of_namespace(const std::string& name) {
    if (name.rfind(ns_prefix, 0) != 0) {
        return -1;
    }
    try {
        return std::stol(name.substr(std::strlen(ns_prefix)));
    } catch (const std::exception&) {
        return -1;
    }
}
long owner_of_link(const std::string& name) {
    const auto h = name.find('h', std::strlen(link_prefix));
    if (name.rfind(link_prefix, 0) != 0 || h == std::string::npos) {
        return -1;
    }
    try {
        return std::stol(
            name.substr(std::strlen(link_prefix), h - std::strlen(link_prefix)), nullptr, 16
        );
    } catch (const std::exception&) {
        return -1;
    }
}

/// Deletes the namespaces and host ends a crashed earlier run left behind (their pid is gone).
void remove_leftovers() {
    for (const auto& line : lines(run_ip({"netns", "list"}))) {
        const std::string name = line.substr(0, line.find(' '));
        const long pid = owner_of_namespace(name);
        if (pid > 0 && !alive(pid)) {
            run_command({ip_binary(), "netns", "del", name});
        }
    }
    // "7: zkt1f2ah0@if6: <BROADCAST,...": a host end whose namespace is gone lives on.
    for (const auto& line : lines(run_ip({"-o", "link", "show"}))) {
        const auto colon = line.find(": ");
        if (colon == std::string::npos) {
            continue;
        }
        const auto rest = line.substr(colon + 2);
        const std::string name = rest.substr(0, rest.find_first_of("@:"));
        const long pid = owner_of_link(name);
        if (pid > 0 && !alive(pid)) {
            run_command({ip_binary(), "link", "del", name});
        }
    }
}

/// The first /30 of 10.231.0.0/16 no address of this host is in.
int free_block() {
    std::set<int> used;
    const std::string net = "inet " + std::to_string(net_a) + "." + std::to_string(net_b) + ".";
    for (const auto& line : lines(run_ip({"-o", "-4", "addr", "show"}))) {
        const auto at = line.find(net);
        if (at == std::string::npos) {
            continue;
        }
        int c = 0;
        int d = 0;
        if (std::sscanf(line.c_str() + at + net.size(), "%d.%d", &c, &d) == 2) {
            used.insert((c * 256 + d) / 4);
        }
    }
    for (int block = 1; block < max_blocks; ++block) {
        if (!used.contains(block)) {
            return block;
        }
    }
    throw std::runtime_error("no free /30 left in 10.231.0.0/16");
}

std::string address_in(int block, int host) {
    const int n = block * 4 + host;
    return std::to_string(net_a) + "." + std::to_string(net_b) + "." + std::to_string(n / 256) +
           "." + std::to_string(n % 256);
}

/// Held while namespaces are made: two test processes must not pick the same /30.
class setup_lock {
public:
    setup_lock() : fd_(::open("/run/zkd-test-netns.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
        if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
            throw std::runtime_error(
                std::string("cannot lock /run/zkd-test-netns.lock: ") + std::strerror(errno)
            );
        }
    }
    setup_lock(const setup_lock&) = delete;
    setup_lock& operator=(const setup_lock&) = delete;
    ~setup_lock() { ::close(fd_); }  // releases the lock

private:
    int fd_;
};

}  // namespace

std::string netns_unavailable() {
    if (::geteuid() != 0) {
        return "not root (euid " + std::to_string(::geteuid()) +
               "): network namespaces and veth links need root (CI runs the suite as root)";
    }
    if (ip_binary().empty()) {
        return "no `ip` program (iproute2; tools/install-deps.sh installs it)";
    }
    return "";
}

std::string run_ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv{ip_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_command(argv, {}, std::chrono::seconds(20));
    if (r.exit_code != 0) {
        std::string cmd = "ip";
        for (const auto& a : args) {
            cmd += " " + a;
        }
        throw std::runtime_error(
            cmd + " failed (exit " + std::to_string(r.exit_code) + "): " + r.err
        );
    }
    return r.out;
}

netns::netns() {
    if (auto why = netns_unavailable(); !why.empty()) {
        throw std::runtime_error(why);
    }
    static std::atomic<int> made{0};
    const int n = made++;
    char hex[16];
    std::snprintf(hex, sizeof hex, "%x", static_cast<unsigned>(::getpid()));
    name_ = ns_prefix + std::to_string(::getpid()) + "-" + std::to_string(n);
    host_link_ = link_prefix + std::string(hex) + "h" + std::to_string(n);  // at most 15 chars
    const std::string inner_link = link_prefix + std::string(hex) + "n" + std::to_string(n);

    const setup_lock lock;
    remove_leftovers();
    // A namespace of this name would be from an earlier run whose pid this one reuses.
    run_command({ip_binary(), "netns", "del", name_});
    run_command({ip_binary(), "link", "del", host_link_});
    const int block = free_block();
    host_address_ = address_in(block, 1);
    inner_address_ = address_in(block, 2);
    try {
        run_ip({"netns", "add", name_});
        run_ip(
            {"link", "add", host_link_, "type", "veth", "peer", "name", inner_link, "netns", name_}
        );
        run_ip({"addr", "add", host_address_ + "/30", "dev", host_link_});
        run_ip({"link", "set", host_link_, "up"});
        run_ip({"-n", name_, "addr", "add", inner_address_ + "/30", "dev", inner_link});
        run_ip({"-n", name_, "link", "set", inner_link, "up"});
        run_ip({"-n", name_, "link", "set", "lo", "up"});
    } catch (...) {
        run_command({ip_binary(), "link", "del", host_link_});
        run_command({ip_binary(), "netns", "del", name_});
        throw;
    }
}

netns::~netns() {
    // Deleting either end of a veth deletes both; a namespace file gone is fine.
    run_command({ip_binary(), "link", "del", host_link_});
    run_command({ip_binary(), "netns", "del", name_});
}

std::string netns::path() const {
    return "/run/netns/" + name_;
}

void netns::cut() {
    run_ip({"link", "set", host_link_, "down"});
}

void netns::heal() {
    run_ip({"link", "set", host_link_, "up"});
}

}  // namespace zkd::test
