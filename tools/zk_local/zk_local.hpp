// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

// Starts and stops a throw-away local ZooKeeper 3.8 (one server, or an ensemble on loopback)
// from the Debian `zookeeper` package, for tests and for the `zkd-zk-local` tool.
//
// Layout of a cluster directory (the state file lets another process re-open it):
//   <dir>/zk-local.state                      ports, pids, java command, owned-dir flag
//   <dir>/log4j.properties                    routes the server log to its stdout
//   <dir>/server<N>/{zoo.cfg,server.log,data/myid}   N = myid = member index + 1
//
// Members are indexed 0..size()-1 in this API (the CLI counts from 1). Every failure of the
// harness itself (java missing, port clash after all retries, server exits or never serves)
// throws std::runtime_error whose message includes the relevant server log tail.
// A cluster is not thread-safe; four_letter() touches no state and may run concurrently.
namespace zkd::zk_local {

struct options {
    // 1 = standalone; an odd n > 1 = ensemble with standaloneEnabled=false.
    int servers = 1;
    // 0 = free loopback ports picked at run time, retried on a bind clash. Otherwise member i
    // gets client port base_port+i and, in an ensemble, peer base_port+n+i and election
    // base_port+2n+i (no retry: the caller chose the ports).
    std::uint16_t base_port = 0;
    // Empty = a fresh mkdtemp dir under $TMPDIR (or /tmp), removed by stop(). A given dir is
    // created if missing, reused (existing data is kept) and never removed.
    std::filesystem::path dir;
    int tick_ms = 200;
    bool force_sync = false;
    // Covers the whole start, including retries after port clashes.
    std::chrono::seconds start_timeout{60};
    // true: members run in their own session and survive this process (CLI background mode);
    // the destructor leaves them running. false: each member gets PR_SET_PDEATHSIG(SIGKILL), so
    // a crashed test leaves no JVM behind (they are forked from the main thread or a helper
    // thread that lives as long as the process, so the starting thread may end).
    bool detach = false;
    // Keep the dir even when we created it (debugging).
    bool keep_dir = false;
    // Empty: $JAVA_HOME/bin/java, else `java` on PATH, else /usr/bin/java.
    std::string java;
    // Empty: the Debian jars (zookeeper.jar plus the slf4j->log4j binding when installed).
    std::string classpath;
    // Extra zoo.cfg lines, appended verbatim (later keys win).
    std::vector<std::string> extra_config;
    // The JVM's maximum heap (-Xmx): anything parse_heap() accepts. Empty: auto_heap().
    // ZooKeeper holds every znode in its heap (bench/backlog.sh measures the bytes per pending
    // task); running out of it kills the server with OutOfMemoryError.
    std::string jvm_heap;
    // Log every request the server processes (session, type, path: FinalRequestProcessor at
    // DEBUG) to server.log, for counting where requests go (bench/requests.sh). Slows it down.
    bool log_requests = false;
};

// Memory this process may use: /proc/meminfo's MemTotal, or the cgroup (v2) memory.max when
// that is lower; 0 when neither can be read.
[[nodiscard]] std::uint64_t machine_memory_bytes();
// The heap ZooKeeper gets when none is given: a quarter of `memory_bytes`, at least 256 MiB and
// at most 4 GiB, in whole MiB ("4096m"); "256m" when memory_bytes is 0 (unknown).
[[nodiscard]] std::string auto_heap(std::uint64_t memory_bytes);
[[nodiscard]] std::string auto_heap();
// A heap size as a number with an optional unit k, m or g (any case; none = bytes), at least
// 64 MiB, at most 1 TiB; returned in MiB as java spells it ("2g" -> "2048m", "300m" -> "300m").
// Throws std::invalid_argument with a message that names the rule.
[[nodiscard]] std::string parse_heap(std::string_view text);

// Whether a server can be launched: java resolves to an executable and the ZooKeeper jar is
// installed. On false, *why (if given) says what is missing and which packages to install.
[[nodiscard]] bool java_and_server_available(std::string* why = nullptr);

class cluster {
public:
    // Starts every member and returns once all serve requests (standalone, or leader/follower).
    static cluster start(options opts);
    // Re-opens a cluster from its dir (usually one started with detach=true by another process).
    // Members started from an attached cluster are detached too; the destructor stops nothing.
    static cluster attach(const std::filesystem::path& dir);

    cluster(cluster&& other) noexcept;
    cluster& operator=(cluster&& other) noexcept;
    cluster(const cluster&) = delete;
    cluster& operator=(const cluster&) = delete;
    // Calls stop() unless the cluster is detached, attached or released.
    ~cluster();

    // "127.0.0.1:p1,127.0.0.1:p2,..." for all members, or for one member.
    [[nodiscard]] std::string connect_string() const;
    [[nodiscard]] std::string connect_string(int member) const;
    [[nodiscard]] int size() const;
    [[nodiscard]] std::uint16_t client_port(int member) const;
    [[nodiscard]] const std::filesystem::path& dir() const;
    [[nodiscard]] std::filesystem::path log_path(int member) const;
    // Process id of a running member, 0 when it is not running.
    [[nodiscard]] int pid(int member) const;
    [[nodiscard]] bool running(int member) const;

    // SIGTERM, wait up to 10 s, then SIGKILL; no-op when the member is not running.
    void stop_member(int member);
    // SIGKILL at once (a crash, as far as the ensemble can tell).
    void kill_member(int member);
    // Restarts a stopped member with the same config and data; returns once it serves.
    void start_member(int member);
    // Waits until the member serves requests; throws on timeout or if it exits.
    void wait_serving(int member, std::chrono::milliseconds timeout) const;

    // Sends a four-letter-word command and reads the reply to EOF; "" on any failure.
    [[nodiscard]] std::string four_letter(
        int member,
        std::string_view cmd,
        std::chrono::milliseconds timeout = std::chrono::seconds{2}
    ) const;
    // "standalone", "leader", "follower" or "observer" from `srvr`; "" when not serving.
    [[nodiscard]] std::string mode(int member) const;
    // The last `lines` lines of the member's server.log.
    [[nodiscard]] std::string log_tail(int member, std::size_t lines) const;

    // Stops all members, then removes the dir if we created it (and neither keep_dir nor
    // options::keep_dir asks to keep it). Idempotent.
    void stop(bool keep_dir = false);
    // Forgets the members without stopping them (CLI background start).
    void release();
    // Called at the start of every stop() that has members to stop, while the logs still
    // exist (the test support prints them when the current test failed). Must not throw.
    void on_stop(std::function<void(const cluster&)> hook);

private:
    struct impl;
    explicit cluster(std::unique_ptr<impl> state);
    impl& state() const;

    std::unique_ptr<impl> impl_;
};

// Parses the Mode line of a `srvr` reply; "" when the server is not serving.
[[nodiscard]] std::string parse_mode(std::string_view srvr_reply);

}  // namespace zkd::zk_local
