// SPDX-License-Identifier: MIT
#pragma once

#include "handlers/registry.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/event.hpp"
#include "roles/master/master.hpp"
#include "roles/stats.hpp"
#include "roles/worker/worker.hpp"
#include "zkco/config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace zkd::roles {

enum class node_role {
    automatic,    ///< run for master and work (capacity > 0)
    worker_only,  ///< never run for master
    standby,      ///< run for master, never work
};

/// The session timeout a member asks for unless told otherwise (`zkd run --session-timeout`).
/// A member that dies without closing its session keeps its role until ZooKeeper expires the
/// session, one timeout after its last ping, which is at most a third of a timeout old (the
/// C client pings after a third without traffic): 2/3 to 1 timeout after the death. With 6 s
/// a SIGKILLed master is replaced within about 7 s (the previous default, 10 s,
/// gave 7.5-11 s). The price: a member whose whole process stalls longer (SIGSTOP, a
/// paused VM) loses its role, which costs a takeover, never a task (epoch fencing). So does an
/// event loop stalled that long: zkco's pings go out from the loop (handlers run on a pool).
inline constexpr std::chrono::milliseconds default_session_timeout{6'000};

/// One zkd instance's settings (`zkd run`).
struct node_options {
    std::string zk = "127.0.0.1:2181";  ///< hosts, without chroot
    std::string ns = "default";         ///< the cluster lives in /zkd/<ns>
    std::chrono::milliseconds session_timeout = default_session_timeout;
    std::optional<zkco::credentials> auth;
    int capacity = 0;  ///< slots advertised when working
    node_role role = node_role::automatic;
    std::string host;  ///< in member ids and nodes; empty: the hostname
    master_options master;
    worker_options worker;
};

/// Optional links between a running node and its owner; each may be null. Both objects
/// belong to the node's executor and must outlive run_node.
struct node_links {
    /// Kept current by the node (read it on the node's executor).
    node_stats* stats = nullptr;
    /// Set it to shut down gracefully: the worker takes no new tasks and finishes the ones it
    /// holds (publishing their results), then the node leaves the cluster (a master hands
    /// over by ending its session) and run_node completes. Terminal cancellation still
    /// stops everything at once (what is unfinished is requeued by the next master).
    reactor::event* drain = nullptr;
};

/// Runs one zkd instance until cancelled (terminal) or drained: creates the namespace, then,
/// session after session, joins as a new member: works (unless standby or capacity 0) and
/// runs for master (unless worker-only), taking over when elected. A lost session (expiry,
/// declared locally after the session timeout) ends everything of that member; the next
/// session is a new member, so the cluster requeues what the old one held. An unreachable
/// ZooKeeper is retried with backoff, logging each failure. `reg` and `pool` must outlive
/// the call.
boost::asio::awaitable<void> run_node(
    node_options opts,
    const handlers::registry& reg,
    reactor::compute_pool& pool,
    node_links links = {}
);

}  // namespace zkd::roles
