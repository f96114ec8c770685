// SPDX-License-Identifier: MIT
// zkd purge and zkd drop-namespace: deleting what a cluster leaves behind.
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "protocol/route.hpp"
#include "roles/client/inspect.hpp"
#include "roles/cluster/namespace.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace zkd::cli {

namespace {

constexpr const char* purge_help = R"(usage: zkd purge --results [--older-than DUR] [options]

Deletes results nobody consumed (every one, or those older than DUR by the time they were
written): a client still waiting for one of them then waits in vain ('zkd wait' exits 5
afterwards). The master already deletes results after its --result-retention (default 24h);
purge is for sooner. Prints how many it deleted. Exits 0, or 1 on a ZooKeeper error.

  --results               delete results (required: the only thing purge deletes)
  --older-than DUR        only results written more than DUR ago (e.g. 30m, 2h)
  --zk, --namespace, --connect-timeout, --user, --password, --password-file, --config
                          as for every command (see 'zkd submit --help')
)";

constexpr const char* route_help = R"(usage: zkd route [--] KEY CELL [CELL...]

Prints the CELL that KEY goes to, for a deployment of several zkd clusters ("cells": a
namespace on a ZooKeeper ensemble each) whose clients send each key (a customer, a job) to
one of them (docs/scaling.md). Every client that lists the same cells, in any order, picks
the same one for a key; adding a cell moves only the keys the new cell wins (about 1/n).
A CELL is any name that is the same in every client, e.g. zk-a1:2181,zk-a2:2181@orders:
  cell=$(zkd route "$customer" zk-a:2181@orders zk-b:2181@orders)
  zkd submit --zk "${cell%@*}" --namespace "${cell#*@}" resize '{...}'
Exits 0, or 2 on a usage error (no KEY, no CELL, a CELL given twice). Talks to no server.
)";

constexpr const char* drop_help = R"(usage: zkd drop-namespace --yes [--force] [options]

Deletes the namespace /zkd/<NS> and everything in it: the cluster's layout, pending tasks,
assignments, results, crack jobs. Refused while members are alive in it (workers, a master,
candidates), unless --force: stop the 'zkd run's first. With a cluster run with --user, the
same credentials are needed. Exits 0 when the namespace is gone (also if there was none), 1
if it was refused or failed.

  --yes                   required: there is no undo
  --force                 drop even while members are alive (they fail and rejoin an empty
                          namespace of their own making)
  --zk, --namespace, --connect-timeout, --user, --password, --password-file, --config
                          as for every command (see 'zkd submit --help')
)";

/// Most removes in one multi (well under the server's 1 MiB request limit).
constexpr std::size_t removes_per_multi = 500;

/// Deletes `path` and everything below it; yields how many nodes went (no_node: 0).
/// A leaf goes in one request; below a node, leaves go many to a multi, and a multi that
/// fails (a child with children of its own, a node gone meanwhile) is redone one at a time.
/// (co_await results are named before they are tested: GCC 12 and co_await in conditions.)
asio::awaitable<zkco::result<std::size_t>> delete_tree(zkco::client& zk, std::string path) {
    std::size_t removed = 0;
    for (;;) {
        auto gone = co_await zkco::with_timeout(zk.remove(path), 30s);
        if (gone) {
            co_return removed + 1;
        }
        if (gone.error() == zkco::errc::no_node) {
            co_return removed;
        }
        if (gone.error() != zkco::errc::not_empty) {
            co_return gone.error();
        }
        auto kids = co_await zkco::with_timeout(zk.get_children(path), 30s);
        if (!kids) {
            if (kids.error() == zkco::errc::no_node) {
                co_return removed;
            }
            co_return kids.error();
        }
        for (std::size_t first = 0; first < kids->names.size(); first += removes_per_multi) {
            const auto last = std::min(kids->names.size(), first + removes_per_multi);
            std::vector<zkco::multi_op> ops;
            for (auto i = first; i < last; ++i) {
                ops.emplace_back(zkco::op::remove{zkco::join_path(path, kids->names[i])});
            }
            const auto batch = co_await zkco::with_timeout(zk.multi(std::move(ops)), 30s);
            if (batch) {
                removed += last - first;
                continue;
            }
            for (auto i = first; i < last; ++i) {
                auto below = co_await delete_tree(zk, zkco::join_path(path, kids->names[i]));
                if (!below) {
                    co_return below.error();
                }
                removed += *below;
            }
        }
        // Children gone: the node goes at the top of the loop (again, if one came meanwhile).
    }
}

/// How many of `dir`'s children a live session owns (ephemeral nodes): what a stranger wrote
/// there stands for no member. Errors: the listing's or a read's.
asio::awaitable<zkco::result<std::size_t>> owned_children(zkco::client& zk, std::string dir) {
    auto kids = co_await zkco::with_timeout(zk.get_children(dir), 30s);
    if (!kids) {
        if (kids.error() == zkco::errc::no_node) {
            co_return std::size_t{0};
        }
        co_return kids.error();
    }
    zkco::read_batch batch(zk);
    std::vector<zkco::read_batch::slot<std::optional<zkco::stat>>> stats;
    for (const auto& name : kids->names) {
        stats.push_back(batch.exists(zkco::join_path(dir, name)));
    }
    if (auto done = co_await zkco::with_timeout(batch.wait(), 30s); !done) {
        co_return done.error();
    }
    std::size_t owned = 0;
    for (const auto& s : stats) {
        owned += *s && **s && (**s)->ephemeral_owner != 0 ? 1 : 0;
    }
    co_return owned;
}

/// The members alive in the namespace at `ns`: "2 workers, 1 candidate and a master", or
/// empty when none.
asio::awaitable<zkco::result<std::string>> members_alive(zkco::client& zk, std::string ns) {
    std::string alive;
    const auto count = [&](std::size_t n, const char* what) {
        if (n > 0) {
            alive +=
                (alive.empty() ? "" : ", ") + std::to_string(n) + " " + what + (n == 1 ? "" : "s");
        }
    };
    for (const auto& [dir, what] : {std::pair{"/workers", "worker"}, {"/election", "candidate"}}) {
        auto owned = co_await owned_children(zk, ns + dir);
        if (!owned) {
            co_return owned.error();
        }
        count(*owned, what);
    }
    auto master = co_await zkco::with_timeout(zk.exists(ns + "/master"), 30s);
    if (!master) {
        co_return master.error();
    }
    if (*master && (*master)->ephemeral_owner != 0) {
        alive += std::string(alive.empty() ? "" : ", ") + "a master";
    }
    co_return alive;
}

}  // namespace

int cmd_route(int argc, char** argv) {
    std::vector<std::string> words;
    bool options = true;  // until "--": after it, a word starting with '-' is a key or cell
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (options && a == "--") {
            options = false;
            continue;
        }
        if (options && (a == "--help" || a == "-h")) {
            std::fputs(route_help, stdout);
            return exit_ok;
        }
        if (options && a.starts_with("-") && a != "-") {
            throw usage_error("unknown option '" + a + "' (a KEY starting with '-' goes after --)");
        }
        words.push_back(a);
    }
    if (words.size() < 2) {
        throw usage_error(
            words.empty() ? "route wants a KEY and at least one CELL"
                          : "route wants at least one CELL after the KEY"
        );
    }
    const std::string key = words.front();
    words.erase(words.begin());
    std::vector<std::string> seen = words;
    std::sort(seen.begin(), seen.end());
    if (const auto dup = std::adjacent_find(seen.begin(), seen.end()); dup != seen.end()) {
        throw usage_error("cell '" + *dup + "' is given twice");
    }
    std::printf("%s\n", words[protocol::pick_cell(key, words)].c_str());
    return exit_ok;
}

int cmd_purge(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2, cluster_options({{"--results", false, false}, {"--older-than", true, false}})
    );
    if (a.has("--help")) {
        std::fputs(purge_help, stdout);
        return exit_ok;
    }
    if (!a.positional.empty()) {
        throw usage_error("unexpected argument '" + a.positional.front() + "'");
    }
    if (!a.has("--results")) {
        throw usage_error("purge wants --results (what to delete)");
    }
    const auto older_than = a.duration("--older-than", 0ms, 0ms, 24h * 3650);
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout /*l*/) -> asio::awaitable<int> {
            const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch()
            )
                                 .count();
            std::size_t purged = 0;
            std::size_t kept = 0;
            std::size_t dirs_removed = 0;
            // Every directory below /results: the result shards and the clients' directories.
            auto dirs = co_await zkco::with_timeout(roles::list_result_dirs(zk), 30s);
            if (!dirs) {
                complain("cannot list /results: " + dirs.error().message());
                co_return exit_failed;
            }
            for (const auto& shard : *dirs) {
                auto kids = co_await zkco::with_timeout(zk.get_children(shard), 30s);
                if (!kids) {
                    if (kids.error() == zkco::errc::no_node) {
                        continue;
                    }
                    complain("cannot list " + shard + ": " + kids.error().message());
                    co_return exit_failed;
                }
                std::size_t left = kids->names.size();
                for (const auto& name : kids->names) {
                    const auto path = zkco::join_path(shard, name);
                    if (older_than.count() > 0) {
                        auto st = co_await zkco::with_timeout(zk.exists(path), 30s);
                        if (!st) {
                            complain("cannot read " + path + ": " + st.error().message());
                            co_return exit_failed;
                        }
                        if (!*st || now - (*st)->mtime < older_than.count()) {
                            kept += *st ? 1 : 0;
                            continue;
                        }
                    }
                    // Results can hold children only when someone wrote them there: take those too.
                    auto gone = co_await delete_tree(zk, path);
                    if (!gone) {
                        complain("cannot delete " + path + ": " + gone.error().message());
                        co_return exit_failed;
                    }
                    purged += *gone > 0 ? 1 : 0;
                    --left;
                }
                // A client's directory emptied (or found empty) goes too; shards stay. A result
                // arriving meanwhile keeps it (not_empty), and a writer makes it again.
                if (left == 0 && protocol::layout::is_client_results(zkco::base_name(shard))) {
                    auto removed = co_await zkco::with_timeout(zk.remove(shard), 30s);
                    dirs_removed += removed ? 1 : 0;
                }
            }
            std::printf("purged %zu result(s) from %s", purged, target.chroot.c_str());
            if (older_than.count() > 0) {
                std::printf(
                    " (kept %zu newer than %lld ms)", kept,
                    static_cast<long long>(older_than.count())
                );
            }
            std::printf(", and %zu empty client directories\n", dirs_removed);
            co_return exit_ok;
        }
    );
}

int cmd_drop_namespace(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2, cluster_options({{"--yes", false, false}, {"--force", false, false}})
    );
    if (a.has("--help")) {
        std::fputs(drop_help, stdout);
        return exit_ok;
    }
    if (!a.positional.empty()) {
        throw usage_error("unexpected argument '" + a.positional.front() + "'");
    }
    const auto target = target_of(a);
    if (!a.has("--yes")) {
        throw usage_error(
            "drop-namespace deletes " + target.chroot +
            " and every task and result in it: pass --yes"
        );
    }
    const bool force = a.has("--force");
    return with_root(target, [&](zkco::client& zk, std::string ns) -> asio::awaitable<int> {
        auto alive = co_await members_alive(zk, ns);
        if (!alive) {
            complain("cannot read " + ns + ": " + alive.error().message());
            co_return exit_failed;
        }
        if (!alive->empty() && !force) {
            complain(
                "refusing to drop " + ns + ": " + *alive +
                " alive in it (stop its 'zkd run's first, or pass --force)"
            );
            co_return exit_failed;
        }
        auto gone = co_await delete_tree(zk, ns);
        if (!gone) {
            complain(
                "cannot drop " + ns + ": " + gone.error().message() +
                (gone.error() == zkco::errc::no_auth ? " (it needs the cluster's --user)" : "")
            );
            co_return exit_failed;
        }
        if (*gone == 0) {
            std::printf("no namespace %s: nothing to drop\n", ns.c_str());
        } else {
            std::printf("dropped %s (%zu nodes)\n", ns.c_str(), *gone);
        }
        co_return exit_ok;
    });
}

}  // namespace zkd::cli
