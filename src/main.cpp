// SPDX-License-Identifier: MIT
// zkd: one binary. `zkd run` joins a cluster (worker, candidate master or both); the other
// commands are clients of a cluster (src/cli).
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"

#include <spdlog/cfg/env.h>

#include <cstdio>
#include <map>
#include <string>
#include <unistd.h>

namespace {

constexpr const char* main_help = R"(usage: zkd <command> [options]

commands:
  run       join a cluster: work and run for master (auto-elected)
  submit    submit a task; with --wait, wait for and print its result
  wait      wait for a task's result and print it
  status    show where a task is (pending, assigned, running, its result)
  cancel    cancel a task
  tasks     list pending and running tasks, with worker and age
  cluster   show the master, the workers with their load, the queue and throughput
  workflow  run a DAG of tasks (run, status, cancel, list): chains, groups, map, fan-in
  schedule  recurring tasks, every DUR or by cron (add, list, show, rm, pause, resume)
  crack     find an MD5 preimage with the whole cluster (word list or brute force)
  purge     delete results nobody consumed (--results [--older-than DUR])
  drop-namespace delete the namespace and all in it (--yes; refused while members live)
  route     print which of several clusters (cells) a key goes to (docs/scaling.md)

Run 'zkd <command> --help' for a command's options. Every command but route takes
--zk CONNECT (default 127.0.0.1:2181; hosts with an optional /path) and --namespace NS
(default "default"); the cluster lives in <path>/zkd/<NS>. Only 'zkd run' (and 'submit
--create-namespace') creates a namespace: the other commands refuse one with no cluster.

Options come from the command line, then the environment (ZKD_ plus the option's name:
--zk is ZKD_ZK, --session-timeout is ZKD_SESSION_TIMEOUT), then a config file given by
--config FILE or ZKD_CONFIG, with lines like 'zk = 10.0.0.1:2181' and '# comments'.
A ZKD_ variable that is no option is warned about (with the nearest name) and ignored.

Exit codes: 0 ok, 1 failed (the task or the command), 2 usage error, 3 ZooKeeper
unreachable, 4 timed out, 5 no such task, 6 queue full (submit); 130 for an interrupted
'submit --wait'.

'zkd --version' (or --version after any command) prints the version.
)";

/// True when --version comes before any `--` (after which everything is an argument).
bool wants_version(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            return false;
        }
        if (a == "--version") {
            return true;
        }
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    spdlog::cfg::load_env_levels();
    const std::string cmd = argc > 1 ? argv[1] : "";
    const std::map<std::string, int (*)(int, char**)> commands{
        {"run", zkd::cli::cmd_run},           {"submit", zkd::cli::cmd_submit},
        {"wait", zkd::cli::cmd_wait},         {"status", zkd::cli::cmd_status},
        {"cancel", zkd::cli::cmd_cancel},     {"tasks", zkd::cli::cmd_tasks},
        {"cluster", zkd::cli::cmd_cluster},   {"crack", zkd::cli::cmd_crack},
        {"purge", zkd::cli::cmd_purge},       {"drop-namespace", zkd::cli::cmd_drop_namespace},
        {"workflow", zkd::cli::cmd_workflow}, {"schedule", zkd::cli::cmd_schedule},
        {"route", zkd::cli::cmd_route},
    };
    if (wants_version(argc, argv)) {
        std::printf("zkd %s\n", ZKD_VERSION);
        return zkd::cli::exit_ok;
    }
    // A ZKD_ variable no command knows is most likely a typo: say so (once), then go on.
    for (const auto& [name, nearest] : zkd::cli::unknown_environment(environ)) {
        std::fprintf(
            stderr, "zkd: warning: ignoring %s: no zkd option has this variable%s%s%s\n",
            name.c_str(), nearest.empty() ? "" : " (did you mean ", nearest.c_str(),
            nearest.empty() ? "" : "?)"
        );
    }
    try {
        if (const auto it = commands.find(cmd); it != commands.end()) {
            return it->second(argc, argv);
        }
        if (cmd == "--help" || cmd == "-h" || cmd == "help") {
            std::fputs(main_help, stdout);
            return zkd::cli::exit_ok;
        }
        throw zkd::cli::usage_error(
            cmd.empty() ? "a command is needed" : "unknown command '" + cmd + "'"
        );
    } catch (const zkd::cli::usage_error& e) {
        // Escaped: a message may quote what was typed (a type name with control characters).
        std::fprintf(
            stderr, "zkd: %s\n(see 'zkd %s--help')\n", zkd::cli::printable(e.what()).c_str(),
            commands.contains(cmd) ? (cmd + " ").c_str() : ""
        );
        return zkd::cli::exit_usage;
    }
}
