// SPDX-License-Identifier: MIT
// Commands whose building blocks are still being written (see the open issues).
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"

namespace zkd::cli {

namespace {
int not_yet(const char* what) {
    complain(std::string("'") + what + "' is not available in this build yet");
    return exit_failed;
}
}  // namespace

int cmd_tasks(int, char**) { return not_yet("tasks"); }
int cmd_cluster(int, char**) { return not_yet("cluster"); }
int cmd_crack(int, char**) { return not_yet("crack"); }

}  // namespace zkd::cli
