// SPDX-License-Identifier: MIT
// Exec task types, configuration (docs/exec.md): `--exec` flags and config file settings
// into program_config, pure.
#include "handlers/exec.hpp"
#include "handlers/exec/detail/errors.hpp"
#include "protocol/syntax.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <list>
#include <memory>
#include <mutex>
#include <pwd.h>
#include <set>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::handlers::exec {

using detail::bad;

// --- configuration (pure) --------------------------------------------------------------------

std::vector<std::string> split_argv(std::string_view text) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) {
            ++i;
        }
        const std::size_t start = i;
        while (i < text.size() && text[i] != ' ' && text[i] != '\t') {
            ++i;
        }
        if (i > start) {
            out.emplace_back(text.substr(start, i - start));
        }
    }
    return out;
}

namespace {

std::chrono::milliseconds duration_setting(std::string_view key, std::string_view value) {
    const auto d = protocol::parse_duration(value);
    if (!d || *d > std::chrono::hours(24 * 365)) {
        bad("exec." + std::string(key) + " wants a duration up to 365 days (" +
            std::string(protocol::duration_forms) + "), not '" + std::string(value) + "'");
    }
    return *d;
}

constexpr std::array<std::string_view, 19> settings{
    "timeout",   "max-timeout",   "max-output",     "concurrency",   "output",
    "env",       "dir",           "user",           "kill-grace",    "mode",
    "warm",      "max-tasks",     "max-memory",     "start-timeout", "memory-limit",
    "cpu-limit", "max-processes", "max-open-files", "nice"};

/// A config key's type name and setting ("img.v2.timeout": "img.v2" and "timeout"); the
/// setting is empty when the key defines the type. A known setting suffix wins over a dot in
/// the type name.
std::pair<std::string, std::string> split_key(std::string_view key) {
    for (const auto s : settings) {
        if (key.size() > s.size() + 1 && key.ends_with(s) &&
            key[key.size() - s.size() - 1] == '.') {
            return {std::string(key.substr(0, key.size() - s.size() - 1)), std::string(s)};
        }
    }
    return {std::string(key), {}};
}

std::vector<std::string> parse_env(std::string_view key, std::string_view value) {
    std::vector<std::string> env;
    std::size_t start = 0;
    while (start <= value.size()) {
        auto comma = value.find(',', start);
        if (comma == std::string_view::npos) {
            comma = value.size();
        }
        auto item = std::string(value.substr(start, comma - start));
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        const std::string var = item.substr(0, item.find('='));
        if (var.empty() || var.find_first_of(" \t") != std::string::npos) {
            if (!item.empty() || value.find_first_not_of(' ') != std::string_view::npos) {
                bad("exec." + std::string(key) +
                    " wants NAME or NAME=VALUE items separated by commas, not '" +
                    std::string(value) + "'");
            }
        } else {
            env.push_back(item);
        }
        start = comma + 1;
    }
    return env;
}

std::size_t size_setting(std::string_view key, std::string_view value) {
    const auto n = parse_size(value);
    if (!n || *n == 0 || *n > max_max_output) {
        bad("exec." + std::string(key) + " wants a size from 1 to 512KiB (e.g. 64KiB), not '" +
            std::string(value) + "'");
    }
    return *n;
}

int count_setting(std::string_view key, std::string_view value) {
    const auto n = parse_size(value);
    if (!n || value.find_first_not_of("0123456789") != std::string_view::npos || *n > 100'000) {
        bad("exec." + std::string(key) + " wants a whole number from 0 to 100000, not '" +
            std::string(value) + "'");
    }
    return static_cast<int>(*n);
}

std::size_t memory_setting(std::string_view key, std::string_view value) {
    const auto n = parse_size(value);
    if (!n || *n == 0) {
        bad("exec." + std::string(key) + " wants a size (e.g. 512MiB, 2GiB), not '" +
            std::string(value) + "'");
    }
    return *n;
}

/// A whole number from `min` to `max` (a limit's count).
int bounded_setting(std::string_view key, std::string_view value, int min, int max) {
    const auto n = parse_size(value);
    if (!n || value.find_first_not_of("0123456789") != std::string_view::npos ||
        *n < static_cast<std::size_t>(min) || *n > static_cast<std::size_t>(max)) {
        bad("exec." + std::string(key) + " wants a whole number from " + std::to_string(min) +
            " to " + std::to_string(max) + ", not '" + std::string(value) + "'");
    }
    return static_cast<int>(*n);
}

std::size_t memory_limit_setting(std::string_view key, std::string_view value) {
    const auto n = parse_size(value);
    if (!n || *n < std::size_t{1024} * 1024) {
        bad("exec." + std::string(key) + " wants a size of at least 1MiB (e.g. 512M, 2G), not '" +
            std::string(value) + "'");
    }
    return *n;
}

run_mode mode_setting(std::string_view key, std::string_view value) {
    if (value != "once" && value != "serve") {
        bad("exec." + std::string(key) + " wants once or serve, not '" + std::string(value) + "'");
    }
    return value == "serve" ? run_mode::serve : run_mode::once;
}

output_mode output_setting(std::string_view key, std::string_view value) {
    if (value != "json" && value != "text") {
        bad("exec." + std::string(key) + " wants json or text, not '" + std::string(value) + "'");
    }
    return value == "json" ? output_mode::json : output_mode::text;
}

/// Sets `setting` (one of `settings`) of `c` from `key`'s value.
void set_setting(
    program_config& c, const std::string& setting, std::string_view key, std::string_view value
) {
    if (setting == "timeout") {
        c.timeout = duration_setting(key, value);
    } else if (setting == "max-timeout") {
        c.max_timeout = duration_setting(key, value);
    } else if (setting == "kill-grace") {
        c.kill_grace = duration_setting(key, value);
    } else if (setting == "max-output") {
        c.max_output = size_setting(key, value);
    } else if (setting == "concurrency") {
        c.concurrency = count_setting(key, value);
    } else if (setting == "output") {
        c.output = output_setting(key, value);
    } else if (setting == "env") {
        c.env = parse_env(key, value);
    } else if (setting == "dir") {
        c.dir = value;
    } else if (setting == "user") {
        c.user = value;
    } else if (setting == "mode") {
        c.mode = mode_setting(key, value);
    } else if (setting == "warm") {
        c.warm = count_setting(key, value);
    } else if (setting == "max-tasks") {
        c.max_tasks = count_setting(key, value);
    } else if (setting == "max-memory") {
        c.max_memory = memory_setting(key, value);
    } else if (setting == "start-timeout") {
        c.start_timeout = duration_setting(key, value);
    } else if (setting == "memory-limit") {
        c.limits.memory = memory_limit_setting(key, value);
    } else if (setting == "cpu-limit") {
        parse_cpu_limit(key, value, c.limits);
    } else if (setting == "max-processes") {
        c.limits.max_processes = bounded_setting(key, value, 1, 1'000'000);
    } else if (setting == "max-open-files") {
        c.limits.max_open_files = bounded_setting(key, value, 4, 1'048'576);
    } else if (setting == "nice") {
        c.nice = bounded_setting(key, value, 0, 19);
    }
}

/// Refuses `setting`, unknown to exec types, naming the nearest known one or all of them.
[[noreturn]] void unknown_setting(
    const std::string& key, const std::string& type, const std::string& setting
) {
    const auto near = protocol::nearest(setting, settings, 3);
    std::string known;
    for (const auto s : settings) {
        if (!known.empty()) {
            known += ", ";
        }
        known += s;
    }
    bad("exec." + key + ": unknown setting '" + setting + "' of exec type '" + type + "' (" +
        (near.empty() ? "settings: " + known : "did you mean '" + near + "'?") + ")");
}

/// Refuses `key`, a config key that defines a type, when it is a type of `defined` followed
/// by a dot and more: then the rest is a mistyped setting of that type, not a type of its own.
void refuse_unknown_setting(const std::string& key, const std::set<std::string>& defined) {
    for (auto dot = key.rfind('.'); dot != std::string::npos && dot > 0;
         dot = key.rfind('.', dot - 1)) {
        const std::string type = key.substr(0, dot);
        if (!defined.contains(type)) {
            continue;
        }
        unknown_setting(key, type, key.substr(dot + 1));
    }
}

}  // namespace

void parse_cpu_limit(std::string_view key, std::string_view value, resource_limits& l) {
    const auto refuse = [&] {
        bad("exec." + std::string(key) +
            " wants a CPU time with its unit (30s, 1m30s, 500ms), a share of one core (50%, "
            "200%), or both (30s,50%), not '" +
            std::string(value) + "'");
    };
    resource_limits got;
    std::size_t start = 0;
    while (start <= value.size()) {
        auto comma = value.find(',', start);
        if (comma == std::string_view::npos) {
            comma = value.size();
        }
        std::string_view item = value.substr(start, comma - start);
        while (!item.empty() && item.front() == ' ') {
            item.remove_prefix(1);
        }
        while (!item.empty() && item.back() == ' ') {
            item.remove_suffix(1);
        }
        if (item.empty() || item.find_first_not_of("0123456789") == std::string_view::npos) {
            refuse();  // a bare number could mean either
        }
        if (item.back() == '%') {
            const std::string_view digits = item.substr(0, item.size() - 1);
            const auto n = parse_size(digits);
            if (got.cpu_percent > 0 || !n ||
                digits.find_first_not_of("0123456789") != std::string_view::npos || *n < 1 ||
                *n > 100'000) {
                refuse();
            }
            got.cpu_percent = static_cast<int>(*n);
        } else {
            const auto d = protocol::parse_duration(item);
            if (got.cpu_time.count() > 0 || !d || *d < std::chrono::milliseconds(1) ||
                *d > std::chrono::hours(24 * 365)) {
                refuse();
            }
            got.cpu_time = *d;
        }
        start = comma + 1;
    }
    l.cpu_time = got.cpu_time;
    l.cpu_percent = got.cpu_percent;
}

std::optional<std::size_t> parse_size(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    if (digits == 0 || digits > 12) {
        return std::nullopt;
    }
    const auto n = static_cast<std::size_t>(std::stoull(std::string(text.substr(0, digits))));
    const std::string_view unit = text.substr(digits);
    if (unit.empty() || unit == "B") {
        return n;
    }
    if (unit == "k" || unit == "K" || unit == "KiB") {
        return n * 1024;
    }
    if (unit == "M" || unit == "MiB") {
        return n * 1024 * 1024;
    }
    if (unit == "G" || unit == "GiB") {
        return n * 1024 * 1024 * 1024;
    }
    return std::nullopt;
}

program_config parse_exec_flag(std::string_view value, std::string_view flag) {
    const std::string f(flag);
    const auto eq = value.find('=');
    if (eq == std::string_view::npos) {
        bad(f + " wants NAME=PROGRAM [ARG...], not '" + std::string(value) + "'");
    }
    program_config c;
    c.name = std::string(value.substr(0, eq));
    if (!is_valid_type_name(c.name)) {
        bad(f + ": '" + c.name + "' is not a task type name (1 to 128 of A-Z a-z 0-9 _ . : -)");
    }
    if (const auto [type, setting] = split_key(c.name); !setting.empty()) {
        bad(f + " " + c.name + ": a type name cannot end in '." + setting +
            "'; settings go in the config file (exec." + c.name + " = VALUE)");
    }
    c.argv = split_argv(value.substr(eq + 1));
    if (c.argv.empty()) {
        bad(f + " " + c.name + ": no program given");
    }
    c.mode = flag == "--serve" ? run_mode::serve : run_mode::once;
    return c;
}

void apply_setting(
    std::map<std::string, program_config>& types, std::string_view key, std::string_view value
) {
    const auto [name, setting] = split_key(key);
    if (!is_valid_type_name(name)) {
        bad("exec." + std::string(key) + ": '" + name + "' is not a task type name");
    }
    program_config& c = types[name];
    c.name = name;
    if (!setting.empty()) {
        set_setting(c, setting, key, value);
        return;
    }
    c.argv = split_argv(value);
    if (c.argv.empty()) {
        bad("exec." + name + ": no program given");
    }
}

std::map<std::string, program_config> configure(
    const std::vector<file_setting>& file,
    const std::vector<std::string>& flags,
    const std::vector<std::string>& serve_flags
) {
    std::vector<program_config> given;
    std::set<std::string> defined;
    for (const auto* list : {&flags, &serve_flags}) {
        const std::string_view flag = list == &flags ? "--exec" : "--serve";
        for (const auto& value : *list) {
            auto c = parse_exec_flag(value, flag);
            if (!defined.insert(c.name).second) {
                bad(std::string(flag) + " " + c.name + ": the type is given twice");
            }
            given.push_back(std::move(c));
        }
    }
    for (const auto& line : file) {
        defined.insert(split_key(line.key).first);
    }
    std::map<std::string, program_config> types;
    for (const auto& line : file) {
        try {
            if (split_key(line.key).second.empty()) {
                refuse_unknown_setting(line.key, defined);
            }
            apply_setting(types, line.key, line.value);
        } catch (const std::invalid_argument& e) {
            bad(line.where + ": " + e.what());
        }
    }
    for (auto& c : given) {
        auto& t = types[c.name];
        t.name = c.name;
        t.argv = std::move(c.argv);  // the command line wins over the file's program
        t.mode = c.mode;
    }
    return types;
}

}  // namespace zkd::handlers::exec
