// SPDX-License-Identifier: MIT
// zkd workflow run | status | cancel | list: workflows (docs/workflows.md), through the
// client side of src/roles/workflow.
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "roles/workflow/client.hpp"
#include "workflow/spec.hpp"

#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace zkd::cli {

namespace {

constexpr const char* workflow_help =
    R"(usage: zkd workflow run SPEC [--wait [--timeout DUR]] [--allow-unserved] [--json]
       zkd workflow status ID [--json]
       zkd workflow cancel ID
       zkd workflow list [--json]

Workflows: a DAG of named steps, each an ordinary task, run by the elected master, each task
launched exactly once across failovers (docs/workflows.md). SPEC is a file, or - for stdin:

  {"steps": {"fetch": {"type": "echo", "args": [1, 2, 3]},
             "each":  {"type": "sum", "map": "fetch"},
             "total": {"type": "sum", "args": {}, "after": ["each"]}}}

A step whose args is an object gets its predecessors' values under "inputs"; "map": STEP
runs one task per element of the array STEP returned; "continue_on_failure": true lets its
dependants run when it fails. Also per step: priority, timeout_ms, max_attempts.

  run       validates SPEC and submits it; prints the workflow id (with --wait, its end
            state and result; --json: the whole status as JSON). Refused, with nothing
            created: a spec that is no DAG of known steps, over the size limits, or naming
            a type no live worker serves (unless --allow-unserved).
  status    each step's state, tasks, error and value; the result once it ended.
  cancel    stops the steps not started and cancels the tasks that run.
  list      every workflow of the namespace: id, state, steps, name.

Exit codes: 0 done (run --wait: succeeded); 1 failed, cancelled, or refused; 2 usage;
3 ZooKeeper unreachable; 4 --timeout ran out; 5 no such workflow.
)";

std::string read_spec_text(const std::string& from) {
    std::string text;
    if (from == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
        std::ifstream in(from, std::ios::binary);
        if (!in) {
            throw usage_error("cannot read the spec file '" + from + "'");
        }
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return text;
}

int code_of(const roles::workflow_error& e) {
    switch (e.what) {
    case roles::workflow_error::kind::not_found:
        return exit_not_found;
    case roles::workflow_error::kind::timeout:
        return exit_timeout;
    default:
        return exit_failed;
    }
}

void print_status(const roles::workflow_snapshot& s, bool as_json) {
    if (as_json) {
        std::printf("%s\n", protocol::to_text(roles::to_json(s)).c_str());
        return;
    }
    std::printf(
        "%s%s%s %s%s\n", s.id.c_str(), s.name.empty() ? "" : " ", printable(s.name).c_str(),
        std::string(workflow::to_string(s.status)).c_str(),
        s.adopted ? "" : " (not adopted by a master yet)"
    );
    for (const auto& st : s.steps) {
        std::string line =
            "  " + printable(st.name) + "  " + std::string(workflow::to_string(st.status));
        if (st.tasks > 0) {
            line += "  " + std::to_string(st.done) + "/" + std::to_string(st.tasks) + " tasks";
        }
        if (st.error) {
            line += "  " + printable(st.error->code) + ": " + printable(st.error->message);
        }
        std::printf("%s\n", line.c_str());
    }
    if (s.status != workflow::workflow_status::running) {
        std::printf("result: %s\n", printable(protocol::to_text(s.result)).c_str());
    }
}

int cmd_workflow_run(const args& a) {
    if (a.positional.size() != 2) {
        throw usage_error("workflow run wants one SPEC (a file, or - for stdin)");
    }
    const auto text = read_spec_text(a.positional[1]);
    // Refuse a bad spec before connecting, with its message.
    if (auto spec = workflow::parse_spec(text); !spec) {
        complain("the spec is refused: " + spec.error().message + "; nothing was submitted");
        return exit_failed;
    }
    const bool wait = a.has("--wait");
    const bool as_json = a.has("--json");
    if (a.has("--timeout") && !wait) {
        throw usage_error("workflow run: --timeout bounds --wait, and is given without it");
    }
    const auto timeout = a.duration("--timeout", 0ms, 0ms, 24h * 365);
    roles::workflow_submit_options opts;
    opts.allow_unserved = a.has("--allow-unserved");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto id = co_await roles::submit_workflow(zk, text, opts);
            if (!id) {
                complain(
                    (id.error().what == roles::workflow_error::kind::invalid_spec
                         ? "the spec is refused: "
                         : std::string{}) +
                    id.error().message
                );
                co_return code_of(id.error());
            }
            if (!wait) {
                if (as_json) {
                    std::printf("%s\n", protocol::to_text(json::object{{"id", *id}}).c_str());
                } else {
                    std::printf("%s\n", id->c_str());
                }
                co_return exit_ok;
            }
            if (!as_json) {
                std::fprintf(stderr, "zkd: workflow %s submitted, waiting\n", id->c_str());
            }
            auto s = co_await roles::wait_workflow(zk, *id, timeout);
            if (!s) {
                complain(s.error().message);
                co_return code_of(s.error());
            }
            print_status(*s, as_json);
            co_return s->status == workflow::workflow_status::succeeded ? exit_ok : exit_failed;
        }
    );
}

std::string one_workflow_id(const args& a, const char* sub) {
    if (a.positional.size() != 2) {
        throw usage_error(std::string("workflow ") + sub + " wants one workflow ID");
    }
    return a.positional[1];
}

int cmd_status_of(const args& a) {
    const auto id = one_workflow_id(a, "status");
    const bool as_json = a.has("--json");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto s = co_await roles::read_workflow(zk, id);
            if (!s) {
                complain(s.error().message);
                co_return code_of(s.error());
            }
            print_status(*s, as_json);
            co_return exit_ok;
        }
    );
}

int cmd_cancel_of(const args& a) {
    const auto id = one_workflow_id(a, "cancel");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto s = co_await roles::read_workflow(zk, id);
            if (!s) {
                complain(s.error().message);
                co_return code_of(s.error());
            }
            if (s->status != workflow::workflow_status::running) {
                complain(
                    "workflow " + id + " has already ended (" +
                    std::string(workflow::to_string(s->status)) + ")"
                );
                co_return exit_failed;
            }
            auto c = co_await roles::cancel_workflow(zk, id);
            if (!c) {
                complain(c.error().message);
                co_return code_of(c.error());
            }
            std::printf("cancel requested for %s\n", id.c_str());
            co_return exit_ok;
        }
    );
}

int cmd_workflow_list(const args& a) {
    if (a.positional.size() != 1) {
        throw usage_error("workflow list takes no argument");
    }
    const bool as_json = a.has("--json");
    return with_cluster(
        target_of(a), namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout) -> asio::awaitable<int> {
            auto all = co_await roles::list_workflows(zk);
            if (!all) {
                complain(all.error().message);
                co_return code_of(all.error());
            }
            if (as_json) {
                json::array out;
                for (const auto& w : *all) {
                    out.push_back(roles::to_json(w));
                }
                std::printf("%s\n", protocol::to_text(json::value(std::move(out))).c_str());
                co_return exit_ok;
            }
            for (const auto& w : *all) {
                std::printf(
                    "%s  %-10s %6zu steps  %s\n", w.id.c_str(), w.status.c_str(), w.steps,
                    printable(w.name).c_str()
                );
            }
            co_return exit_ok;
        }
    );
}

}  // namespace

int cmd_workflow(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2,
        cluster_options(
            {{"--wait", false, false},
             {"--timeout", true, false},
             {"--json", false, false},
             {"--allow-unserved", false, false}}
        )
    );
    if (a.has("--help")) {
        std::printf("%s\n%s", workflow_help, cluster_flags_help);
        return exit_ok;
    }
    const std::string sub = a.positional.empty() ? "" : a.positional[0];
    if (sub == "run") {
        return cmd_workflow_run(a);
    }
    if (sub == "status") {
        return cmd_status_of(a);
    }
    if (sub == "cancel") {
        return cmd_cancel_of(a);
    }
    if (sub == "list") {
        return cmd_workflow_list(a);
    }
    throw usage_error(
        sub.empty() ? "workflow wants run, status, cancel or list"
                    : "unknown workflow command '" + sub + "' (run, status, cancel, list)"
    );
}

}  // namespace zkd::cli
