// SPDX-License-Identifier: MIT
#pragma once

#include "zkco/error.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace zkd::zkco {

/// A znode's metadata (the C client's `struct Stat`).
struct stat {
    std::int64_t czxid = 0;
    std::int64_t mzxid = 0;
    std::int64_t ctime = 0;  ///< ms since the epoch
    std::int64_t mtime = 0;  ///< ms since the epoch
    std::int32_t version = 0;
    std::int32_t cversion = 0;
    std::int32_t aversion = 0;
    std::int64_t ephemeral_owner = 0;  ///< session id of the owner, 0 if not ephemeral
    std::int32_t data_length = 0;
    std::int32_t num_children = 0;
    std::int64_t pzxid = 0;

    friend bool operator==(const stat&, const stat&) = default;
};

/// "Any version": disables the version check of delete, set and check.
inline constexpr std::int32_t any_version = -1;

enum class create_mode {
    persistent,
    ephemeral,
    persistent_sequential,
    ephemeral_sequential,
    /// Deleted by the server some time after its last child goes (minutes: the reaper's period).
    container,
    /// Needs the server's extendedTypesEnabled; not allowed inside multi by the 3.8 C client.
    persistent_with_ttl,
    persistent_sequential_with_ttl,
};

bool is_sequential(create_mode m) noexcept;
bool is_ttl(create_mode m) noexcept;

/// Permission bits of an ACL entry.
namespace perms {
inline constexpr std::int32_t read = 1 << 0;
inline constexpr std::int32_t write = 1 << 1;
inline constexpr std::int32_t create = 1 << 2;
inline constexpr std::int32_t del = 1 << 3;
inline constexpr std::int32_t admin = 1 << 4;
inline constexpr std::int32_t all = read | write | create | del | admin;
}  // namespace perms

struct acl_entry {
    std::int32_t perms = perms::all;
    std::string scheme;  ///< "world", "auth", "digest", "ip"
    std::string id;

    friend bool operator==(const acl_entry&, const acl_entry&) = default;
};

using acl_list = std::vector<acl_entry>;

/// Anyone may do anything (ZOO_OPEN_ACL_UNSAFE).
acl_list open_acl();
/// Only the session's authenticated identities (ZOO_CREATOR_ALL_ACL); needs credentials.
acl_list creator_all_acl();
/// Anyone may read (ZOO_READ_ACL_UNSAFE).
acl_list read_acl();
/// The `digest` id of `user:password`, i.e. `user:base64(sha1("user:password"))`.
std::string digest_id(std::string_view user, std::string_view password);

struct create_options {
    // NOLINTNEXTLINE(google-explicit-constructor): `{create_mode::ephemeral}` reads well
    create_options(
        create_mode m = create_mode::persistent, std::chrono::milliseconds t = {}, acl_list a = {}
    )
        : mode(m), ttl(t), acl(std::move(a)) {}

    create_mode mode;
    /// Time to live, for the *_with_ttl modes only.
    std::chrono::milliseconds ttl;
    /// Empty: the client's default ACL (config::default_acl).
    acl_list acl;
};

/// The data and metadata of a znode, as read.
struct node {
    std::string data;
    zkco::stat stat;
};

/// A znode's ACL and its metadata (stat.aversion is the ACL's version).
struct node_acl {
    acl_list acl;
    zkco::stat stat;
};

/// A znode's children (names, not paths) and its metadata.
struct children {
    std::vector<std::string> names;
    zkco::stat stat;
};

enum class event_type {
    created,
    deleted,
    changed,
    child,
};

std::string_view to_string(event_type t) noexcept;

/// The one-shot event of a watch.
struct watch_event {
    event_type type = event_type::changed;
    std::string path;  ///< relative to the client's chroot
};

enum class session_state {
    connecting,    ///< started, never connected yet
    connected,     ///< connected to a server
    disconnected,  ///< was connected, reconnecting; the session may still be alive
    expired,       ///< the session is gone (said by the server, or declared locally)
    auth_failed,   ///< the server refused the credentials; terminal
    closed,        ///< closed by us; terminal
};

std::string_view to_string(session_state s) noexcept;
bool is_terminal(session_state s) noexcept;

/// A session state transition as seen by `client::async_wait_state`. The generation counts
/// transitions, so a waiter that passes the last one it saw never misses a change.
struct state_change {
    session_state state = session_state::connecting;
    std::uint64_t generation = 0;
};

/// Requests a client has sent, for "ZooKeeper operations per task" figures.
struct client_counters {
    std::uint64_t reads = 0;      ///< exists, get, get_children, sync
    std::uint64_t writes = 0;     ///< write transactions: create, remove, set, and each multi
    std::uint64_t write_ops = 0;  ///< writes counting every op inside a multi
    std::uint64_t multis = 0;     ///< multi transactions
    std::uint64_t watches = 0;    ///< watches armed
};

// --- multi -------------------------------------------------------------------------------

namespace op {
struct create {
    std::string path;
    std::string data;
    create_mode mode = create_mode::persistent;  ///< TTL modes are rejected (unimplemented)
    acl_list acl;                                ///< empty: the client's default
};
struct remove {
    std::string path;
    std::int32_t version = any_version;
};
struct set {
    std::string path;
    std::string data;
    std::int32_t version = any_version;
};
/// Fails the transaction unless the node exists (and has `version`, unless any_version).
struct check {
    std::string path;
    std::int32_t version = any_version;
};
}  // namespace op

using multi_op = std::variant<op::create, op::remove, op::set, op::check>;

/// Per-op outcome of a multi. `ec` is runtime_inconsistency for ops that were not run
/// because another one failed.
struct op_result {
    error_code ec;
    std::string path;  ///< create: the created path (differs from the request for sequential)
    zkco::stat stat;   ///< set: the node's new metadata
};

/// Outcome of a multi: the first failure (if any) and, when the server answered, one
/// op_result per op. On connection loss `results` is empty and the outcome is unknown.
struct multi_result {
    error_code ec;
    std::vector<op_result> results;

    explicit operator bool() const noexcept { return !ec; }
    /// Index of the op that failed (the first with a code other than runtime_inconsistency).
    std::optional<std::size_t> failed_op() const noexcept;
};

/// Bytes the request would take on the wire, roughly (paths, data, ACLs, headers), to keep
/// batches well under the server's jute.maxbuffer (1 MiB by default).
std::size_t estimated_size(const multi_op& op) noexcept;

// --- paths -------------------------------------------------------------------------------

/// Checks a ZooKeeper path: absolute, no trailing '/', no empty, "." or ".." segments, no
/// NUL. Returns bad_arguments with no detail otherwise.
error_code validate_path(std::string_view path) noexcept;
/// "/a/b" + "c" -> "/a/b/c"; "/" + "c" -> "/c".
std::string join_path(std::string_view parent, std::string_view child);
/// "/a/b" -> "/a"; "/a" -> "/"; "/" -> "/".
std::string_view parent_path(std::string_view path) noexcept;
/// "/a/b" -> "b".
std::string_view base_name(std::string_view path) noexcept;
/// The 10-digit counter a sequential create appends ("task-0000000042" -> 42).
std::optional<std::int64_t> sequence_number(std::string_view name) noexcept;

}  // namespace zkd::zkco
