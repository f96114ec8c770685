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
int cmd_route(int argc, char** argv);

/// The flags that reach the cluster, as every client command's --help lists them.
inline constexpr const char* cluster_flags_help = R"(
  --zk CONNECT            ZooKeeper hosts[/path] (env ZKD_ZK; default 127.0.0.1:2181)
  --namespace NS          cluster namespace (env ZKD_NAMESPACE; default "default")
  --connect-timeout DUR   give up reaching ZooKeeper after DUR (exit 3; default 10s)
  --user NAME, --password SECRET, --password-file FILE
                          digest credentials of a cluster started with them
  --config FILE           read options from FILE (env ZKD_CONFIG; see 'zkd --help')
)";

}  // namespace zkd::cli
