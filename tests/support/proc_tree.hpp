// SPDX-License-Identifier: MIT
// Processes as /proc shows them, for tests that check what a program left running: whether a
// pid lives, the processes below one, their descriptors and zombies.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <system_error>
#include <utility>
#include <vector>

namespace zkd::test {

/// The whole of a (small) file; empty if it cannot be read (libstdc++ throws when a read
/// fails: a /proc file of a process that exits between the open and the read gives ESRCH).
inline std::string read_file(const std::filesystem::path& p) {
    try {
        std::ifstream in(p);
        return std::string((std::istreambuf_iterator<char>(in)), {});
    } catch (const std::exception&) {
        return {};
    }
}

/// Whether `pid` is a live process (a zombie is not).
inline bool alive(pid_t pid) {
    if (pid <= 0) {
        return false;
    }
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

/// Whether any of `pids` is a live process.
inline bool any_alive(const std::vector<pid_t>& pids) {
    return std::any_of(pids.begin(), pids.end(), [](pid_t p) { return alive(p); });
}

/// The pids in `file`, as whitespace-separated decimals (a line each, as scripts write them).
inline std::vector<pid_t> pids_in(const std::filesystem::path& file) {
    std::istringstream in(read_file(file));
    std::vector<pid_t> out;
    for (pid_t pid = 0; in >> pid;) {
        out.push_back(pid);
    }
    return out;
}

/// Every process below `root` (from /proc parent links), with its state letter.
inline std::map<pid_t, char> descendants(pid_t root) {
    namespace fs = std::filesystem;
    std::map<pid_t, std::pair<pid_t, char>> all;
    std::error_code ec;
    for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator{};
         it.increment(ec)) {
        const auto name = it->path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const std::string stat = read_file(it->path() / "stat");
        const auto close = stat.rfind(')');
        if (close == std::string::npos || close + 4 >= stat.size()) {
            continue;
        }
        std::istringstream rest(stat.substr(close + 2));
        char state = '?';
        pid_t ppid = 0;
        rest >> state >> ppid;
        all[std::stoi(name)] = {ppid, state};
    }
    std::map<pid_t, char> out;
    for (bool changed = true; changed;) {
        changed = false;
        for (const auto& [pid, info] : all) {
            if (!out.contains(pid) && (info.first == root || out.contains(info.first))) {
                out[pid] = info.second;
                changed = true;
            }
        }
    }
    return out;
}

/// Open descriptors of `pid` and of every process below it.
inline std::size_t tree_fds(pid_t pid) {
    namespace fs = std::filesystem;
    std::size_t n = 0;
    auto count = [&n](pid_t p) {
        std::error_code ec;
        for (auto it = fs::directory_iterator("/proc/" + std::to_string(p) + "/fd", ec);
             !ec && it != fs::directory_iterator{}; it.increment(ec)) {
            ++n;
        }
    };
    count(pid);
    for (const auto& [p, state] : descendants(pid)) {
        count(p);
    }
    return n;
}

/// The zombies below `pid`.
inline std::size_t zombies_below(pid_t pid) {
    const auto d = descendants(pid);
    return static_cast<std::size_t>(std::count_if(d.begin(), d.end(), [](const auto& e) {
        return e.second == 'Z';
    }));
}

}  // namespace zkd::test
