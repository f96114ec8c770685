// SPDX-License-Identifier: MIT
// zkd-zk-local: starts and stops a local ZooKeeper for development and tests.
#include "zk_local/zk_local.hpp"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace zl = zkd::zk_local;

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

constexpr std::string_view program = "zkd-zk-local";

constexpr std::string_view main_usage = R"(usage: zkd-zk-local <command> [options]

Starts and stops a local ZooKeeper 3.8 from the Debian zookeeper package: one server or an
ensemble, on 127.0.0.1. Servers are numbered from 1.

commands:
  start           start a cluster; prints its connect string on stdout
  stop            stop every server and remove the dir if start created it
  stop-member     stop one server (SIGTERM, SIGKILL after 10 s)
  kill-member     kill one server (SIGKILL)
  start-member    restart a stopped server and wait until it serves
  status          show each server's process and mode
  connect-string  print the connect string
  help            show this text, or 'help <command>'
  --version       print the version

Run 'zkd-zk-local <command> --help' for a command's options.
Exit status: 0 ok, 1 failure, 2 usage error.
Set SPDLOG_LEVEL=debug for progress messages on stderr.
)";

struct command_help {
    std::string_view usage;
    std::string_view text;
};

const std::map<std::string_view, command_help>& command_helps() {
    static const std::map<std::string_view, command_help> helps{
        {"start",
         {"start [--servers N] [--port P] [--dir D] [--tick-ms N] [--max-session-ms N] [--heap "
          "SIZE]\n"
          "       [--force-sync] [--log-requests] [--foreground]",
          R"(Starts N servers (1, or an odd N for an ensemble) and waits until all serve.
Prints the connect string alone on stdout's first line and "dir: D" on stderr.

  --servers N    number of servers (default 1)
  --port P       client port of server 1; server i uses P+i-1, an ensemble's peer and
                 election ports follow at P+N+i-1 and P+2N+i-1 (default: free ports)
  --dir D        cluster dir, created if missing and kept by stop (it is yours)
                 (default: a fresh temp dir, removed by stop)
  --tick-ms N    ZooKeeper tickTime in ms (default 200; sessions from 2 ticks)
  --max-session-ms N
                 longest session timeout granted (maxSessionTimeout; default 60000)
  --heap SIZE    each server's JVM heap (-Xmx): a number with k, m or g (64m or more), or
                 auto (default): a quarter of the machine's memory (or of the cgroup's
                 limit), at least 256m and at most 4g. ZooKeeper holds every znode in its
                 heap and dies of OutOfMemoryError when it is full: 256m did at about
                 191,000 pending zkd tasks, 4g held 1,000,000 (bytes per pending task:
                 docs/performance.md, "ZooKeeper's heap per pending task")
  --force-sync   fsync the transaction log (default off, for speed)
  --log-requests log every request the server processes (session id, type, path) to
                 server<N>/server.log ("Processing request::" lines; slows the server);
                 bench/requests.sh counts them per task
  --foreground   stay up until SIGINT/SIGTERM, then stop everything and remove
                 what was created; by default the servers keep running in the
                 background after this command exits
)"}},
        {"stop",
         {"stop --dir D [--keep-dir]",
          R"(Stops every server (SIGTERM, SIGKILL after 10 s). Removes D if start created it (no
--dir given to start); a dir given to start with --dir is kept, with the logs and data.

  --dir D       the cluster dir printed by start
  --keep-dir    keep D (logs, data) even when start created it
)"}},
        {"stop-member",
         {"stop-member --dir D N", "Stops server N (SIGTERM, SIGKILL after 10 s).\n"}},
        {"kill-member", {"kill-member --dir D N", "Kills server N with SIGKILL, like a crash.\n"}},
        {"start-member",
         {"start-member --dir D N",
          "Restarts stopped server N with its config and data; waits until it serves.\n"}},
        {"status",
         {"status --dir D",
          "Shows per server: running or stopped, pid, client port and the Mode from srvr.\n"
          "Exits 0 when every server serves, 1 otherwise.\n"}},
        {"connect-string", {"connect-string --dir D", "Prints the connect string.\n"}},
    };
    return helps;
}

class usage_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

void print_command_help(std::string_view command) {
    const auto& help = command_helps().at(command);
    std::cout << "usage: " << program << " " << help.usage << "\n\n" << help.text;
}

// Parsed `--flag`, `--key value`, `--key=value` and positional arguments of one command.
struct parsed_args {
    std::map<std::string, std::string> values;
    std::set<std::string> flags;
    std::vector<std::string> positional;
    bool help = false;

    [[nodiscard]] std::optional<std::string> value(const std::string& key) const {
        auto it = values.find(key);
        return it == values.end() ? std::nullopt : std::optional{it->second};
    }
    [[nodiscard]] bool flag(const std::string& key) const { return flags.contains(key); }
};

parsed_args parse_args(
    const std::vector<std::string_view>& args,
    const std::set<std::string>& value_keys,
    const std::set<std::string>& flag_keys,
    std::size_t max_positional
) {
    parsed_args out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string arg(args[i]);
        if (arg == "--help" || arg == "-h") {
            out.help = true;
            continue;
        }
        if (!arg.starts_with("--")) {
            if (out.positional.size() == max_positional) {
                throw usage_error("unexpected argument '" + arg + "'");
            }
            out.positional.push_back(arg);
            continue;
        }
        auto key = arg.substr(2);
        std::optional<std::string> inline_value;
        if (auto eq = key.find('='); eq != std::string::npos) {
            inline_value = key.substr(eq + 1);
            key.resize(eq);
        }
        if (flag_keys.contains(key)) {
            if (inline_value) {
                throw usage_error("--" + key + " takes no value");
            }
            out.flags.insert(key);
        } else if (value_keys.contains(key)) {
            if (inline_value) {
                out.values[key] = *inline_value;
            } else if (i + 1 < args.size()) {
                out.values[key] = std::string(args[++i]);
            } else {
                throw usage_error("--" + key + " needs a value");
            }
        } else {
            throw usage_error("unknown option '" + arg + "'");
        }
    }
    return out;
}

long parse_number(const std::string& text, const std::string& what, long min, long max) {
    long value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value < min || value > max) {
        throw usage_error(
            what + " must be a number from " + std::to_string(min) + " to " + std::to_string(max) +
            ", not '" + text + "'"
        );
    }
    return value;
}

std::string require_dir(const parsed_args& args) {
    auto dir = args.value("dir");
    if (!dir || dir->empty()) {
        throw usage_error("--dir D is required");
    }
    return *dir;
}

// Member argument N (1-based) as a 0-based index.
int member_index(const parsed_args& args, const zl::cluster& cluster) {
    return static_cast<int>(parse_number(args.positional.at(0), "N", 1, cluster.size())) - 1;
}

int run_foreground(zl::cluster& cluster) {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    std::vector<bool> reported(static_cast<std::size_t>(cluster.size()), false);
    for (;;) {
        timespec period{1, 0};
        int sig = sigtimedwait(&signals, nullptr, &period);
        if (sig > 0) {
            std::cerr << program << ": got signal " << sig << ", stopping\n";
            cluster.stop();
            return exit_ok;
        }
        // Members stopped on purpose (stop-member from another shell) show up here too.
        for (int i = 0; i < cluster.size(); ++i) {
            auto index = static_cast<std::size_t>(i);
            bool up = cluster.running(i);
            if (!up && !reported[index]) {
                std::cerr << program << ": server " << i + 1 << " is not running\n";
            }
            reported[index] = !up;
        }
    }
}

int cmd_start(const parsed_args& args) {
    zl::options opts;
    if (auto v = args.value("servers")) {
        opts.servers = static_cast<int>(parse_number(*v, "--servers", 1, 253));
        if (opts.servers % 2 == 0) {
            throw usage_error("--servers must be odd (a ZooKeeper quorum needs a majority)");
        }
    }
    if (auto v = args.value("port")) {
        opts.base_port = static_cast<std::uint16_t>(parse_number(*v, "--port", 1, 65535));
    }
    if (auto v = args.value("tick-ms")) {
        opts.tick_ms = static_cast<int>(parse_number(*v, "--tick-ms", 1, 60'000));
    }
    // ZooKeeper's own cap is 20 ticks (4 s at our 200 ms tick): too short for a client that
    // asks for the usual 10 s. The floor stays 2 ticks, so fast expiry tests still work.
    long max_session = 60'000;
    if (auto v = args.value("max-session-ms")) {
        max_session = parse_number(*v, "--max-session-ms", 2L * opts.tick_ms, 3'600'000);
    }
    opts.extra_config.push_back("maxSessionTimeout=" + std::to_string(max_session));
    if (auto v = args.value("dir")) {
        opts.dir = *v;
    }
    if (auto v = args.value("heap"); v && *v != "auto") {
        try {
            opts.jvm_heap = zl::parse_heap(*v);
        } catch (const std::invalid_argument& e) {
            throw usage_error(std::string("--heap: ") + e.what());
        }
    }
    opts.force_sync = args.flag("force-sync");
    opts.log_requests = args.flag("log-requests");
    bool foreground = args.flag("foreground");
    opts.detach = !foreground;

    if (foreground) {
        // Blocked before any child exists, so a signal during startup waits for sigtimedwait
        // (children unblock everything before exec).
        sigset_t signals;
        sigemptyset(&signals);
        sigaddset(&signals, SIGINT);
        sigaddset(&signals, SIGTERM);
        sigaddset(&signals, SIGHUP);
        sigprocmask(SIG_BLOCK, &signals, nullptr);
    }
    auto cluster = zl::cluster::start(opts);
    std::cout << cluster.connect_string() << std::endl;
    std::cerr << "dir: " << cluster.dir().string() << "\n";
    if (foreground) {
        std::cerr << program << ": " << cluster.size()
                  << " server(s) serving; Ctrl-C or SIGTERM stops them\n";
        return run_foreground(cluster);
    }
    std::cerr << "stop with: " << program << " stop --dir " << cluster.dir().string() << "\n";
    cluster.release();
    return exit_ok;
}

int cmd_stop(const parsed_args& args) {
    if (!args.positional.empty()) {
        throw usage_error("unexpected argument '" + args.positional[0] + "'");
    }
    auto cluster = zl::cluster::attach(require_dir(args));
    bool keep = args.flag("keep-dir");
    cluster.stop(keep);
    std::cerr << program << ": stopped " << cluster.size() << " server(s)";
    if (std::filesystem::exists(cluster.dir())) {
        std::cerr << ", kept " << cluster.dir().string()
                  << (keep ? " (--keep-dir)\n"
                           : " (given to start with --dir; remove it yourself when done)\n");
    } else {
        std::cerr << ", removed " << cluster.dir().string() << "\n";
    }
    return exit_ok;
}

int cmd_member(std::string_view command, const parsed_args& args) {
    auto dir = require_dir(args);
    if (args.positional.size() != 1) {
        throw usage_error("expected one server number N");
    }
    auto cluster = zl::cluster::attach(dir);
    int index = member_index(args, cluster);
    if (command == "stop-member") {
        cluster.stop_member(index);
        std::cerr << program << ": server " << index + 1 << " stopped\n";
    } else if (command == "kill-member") {
        cluster.kill_member(index);
        std::cerr << program << ": server " << index + 1 << " killed\n";
    } else {
        cluster.start_member(index);
        std::cerr << program << ": server " << index + 1 << " serving as " << cluster.mode(index)
                  << "\n";
    }
    return exit_ok;
}

int cmd_status(const parsed_args& args) {
    if (!args.positional.empty()) {
        throw usage_error("unexpected argument '" + args.positional[0] + "'");
    }
    auto cluster = zl::cluster::attach(require_dir(args));
    bool all_serving = true;
    for (int i = 0; i < cluster.size(); ++i) {
        std::cout << "server " << i + 1 << ": ";
        if (int pid = cluster.pid(i); pid != 0) {
            auto mode = cluster.mode(i);
            all_serving = all_serving && !mode.empty();
            std::cout << "running pid " << pid << " port " << cluster.client_port(i) << " mode "
                      << (mode.empty() ? "not-serving" : mode) << "\n";
        } else {
            all_serving = false;
            std::cout << "stopped port " << cluster.client_port(i) << "\n";
        }
    }
    return all_serving ? exit_ok : exit_failure;
}

int cmd_connect_string(const parsed_args& args) {
    if (!args.positional.empty()) {
        throw usage_error("unexpected argument '" + args.positional[0] + "'");
    }
    auto cluster = zl::cluster::attach(require_dir(args));
    std::cout << cluster.connect_string() << "\n";
    return exit_ok;
}

int run(const std::vector<std::string_view>& argv) {
    if (argv.empty()) {
        std::cerr << main_usage;
        return exit_usage;
    }
    if (argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
        if (argv.size() >= 2 && command_helps().contains(argv[1])) {
            print_command_help(argv[1]);
        } else {
            std::cout << main_usage;
        }
        return exit_ok;
    }
    auto command = argv[0];
    if (!command_helps().contains(command)) {
        throw usage_error("unknown command '" + std::string(command) + "'");
    }
    std::vector<std::string_view> rest(argv.begin() + 1, argv.end());
    parsed_args args;
    if (command == "start") {
        args = parse_args(
            rest, {"servers", "port", "dir", "tick-ms", "max-session-ms", "heap"},
            {"force-sync", "log-requests", "foreground"}, 0
        );
    } else if (command == "stop") {
        args = parse_args(rest, {"dir"}, {"keep-dir"}, 0);
    } else if (command.ends_with("-member")) {
        args = parse_args(rest, {"dir"}, {}, 1);
    } else {
        args = parse_args(rest, {"dir"}, {}, 0);
    }
    if (args.help) {
        print_command_help(command);
        return exit_ok;
    }
    if (command == "start") {
        return cmd_start(args);
    }
    if (command == "stop") {
        return cmd_stop(args);
    }
    if (command == "status") {
        return cmd_status(args);
    }
    if (command == "connect-string") {
        return cmd_connect_string(args);
    }
    return cmd_member(command, args);
}

}  // namespace

int main(int argc, char** argv) {
    // Progress and warnings go to stderr: stdout carries only the connect string.
    auto logger = spdlog::stderr_color_mt(std::string(program));
    logger->set_pattern("%n: %^%l%$: %v");
    spdlog::set_default_logger(logger);
    spdlog::cfg::load_env_levels();

    std::vector<std::string_view> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "--version") {
        std::cout << program << " " << ZKD_VERSION << "\n";
        return exit_ok;
    }
    std::string_view command = args.empty() ? std::string_view{} : args[0];
    try {
        return run(args);
    } catch (const usage_error& e) {
        std::cerr << program << ": " << e.what() << "\n";
        if (command_helps().contains(command)) {
            std::cerr << "usage: " << program << " " << command_helps().at(command).usage << "\n";
        } else {
            std::cerr << "run '" << program << " --help' for the commands\n";
        }
        return exit_usage;
    } catch (const std::exception& e) {
        std::cerr << program << ": error: " << e.what() << "\n";
        return exit_failure;
    }
}
