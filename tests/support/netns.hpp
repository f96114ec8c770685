// SPDX-License-Identifier: MIT
// A network namespace joined to the host by a veth pair, for tests that partition a real
// process from ZooKeeper the way a network does it: the link goes down, packets are dropped,
// nothing is reset. Needs root and iproute2 (`ip`).
//
//   host (root namespace)                 namespace zkdt-<pid>-<n>
//   relay on <host_address()>:port  <-veth->  <inner_address()>, `zkd run` inside
//   -> ZooKeeper on loopback
//
// The host end is cut (`ip link set ... down`): the inner end loses its carrier, so what
// the process inside sends is dropped and what the host sends has no route; neither side
// gets a reset. heal() brings it up again. Each netns has its own /30 in 10.231.0.0/16,
// picked under a lock file so that test processes running at once never share one; what a
// crashed earlier run left (namespaces and host ends named after a dead pid) is deleted first.
#pragma once

#include <string>
#include <vector>

namespace zkd::test {

/// Why this process cannot make network namespaces (not root, no `ip`), or "" if it can.
[[nodiscard]] std::string netns_unavailable();

class netns {
public:
    /// Makes the namespace and the veth pair, both ends up with their addresses, the
    /// namespace's loopback up. Throws std::runtime_error saying what failed.
    netns();
    netns(const netns&) = delete;
    netns& operator=(const netns&) = delete;
    /// Deletes the namespace and the veth pair (a process still inside keeps its namespace
    /// alive until it exits, but without a link to anywhere).
    ~netns();

    [[nodiscard]] const std::string& name() const { return name_; }
    /// The namespace's file, for setns(2): /run/netns/<name>. zkd_process runs a `zkd run`
    /// inside when given it.
    [[nodiscard]] std::string path() const;
    /// The host end's address: listen here for connections from inside.
    [[nodiscard]] const std::string& host_address() const { return host_address_; }
    /// The address inside the namespace.
    [[nodiscard]] const std::string& inner_address() const { return inner_address_; }

    /// Takes the link down: from now on nothing crosses it, silently.
    void cut();
    /// Brings the link up again.
    void heal();

private:
    std::string name_;
    std::string host_link_;
    std::string host_address_;
    std::string inner_address_;
};

/// Runs `ip ARGS...` and returns its stdout; throws std::runtime_error with its stderr when it
/// fails.
std::string run_ip(const std::vector<std::string>& args);

}  // namespace zkd::test
