// SPDX-License-Identifier: MIT
// zkd's subcommands. Each takes main's argc/argv (argv[1] is the command), prints what it
// has to say, and returns the process's exit code (cli/options.hpp); usage_error escapes.
#pragma once

namespace zkd::cli {

int cmd_run(int argc, char** argv);
int cmd_submit(int argc, char** argv);
int cmd_wait(int argc, char** argv);
int cmd_status(int argc, char** argv);
int cmd_cancel(int argc, char** argv);
int cmd_tasks(int argc, char** argv);
int cmd_cluster(int argc, char** argv);
int cmd_crack(int argc, char** argv);
int cmd_purge(int argc, char** argv);
int cmd_drop_namespace(int argc, char** argv);
int cmd_workflow(int argc, char** argv);
int cmd_schedule(int argc, char** argv);

}  // namespace zkd::cli
