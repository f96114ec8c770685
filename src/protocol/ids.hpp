// SPDX-License-Identifier: MIT
// Task ids, shards, member ids and election node names (docs/protocol.md §2, §3, §7).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::protocol {

/// FNV-1a, 32 bit (offset basis 2166136261, prime 16777619), over the bytes of `s`.
std::uint32_t fnv1a32(std::string_view s) noexcept;

// --- task ids (§3) ---------------------------------------------------------------------------

/// Length of every task id: `t<P>-<13 digits>-<8 hex><6 hex>`.
inline constexpr std::size_t task_id_length = 31;

/// Hands out task ids `t<9-priority>-<ms:13>-<client:8 hex><counter:6 hex>`. Ids from one
/// generator sort by priority (highest first), then time, then issue order. next() may be
/// called from several threads at once.
class task_id_generator {
public:
    /// A random client id.
    task_id_generator();
    /// A given client id; `first_counter` (mod 2^24) is the counter of the first id.
    explicit task_id_generator(std::uint32_t client, std::uint32_t first_counter = 0) noexcept;

    task_id_generator(const task_id_generator&) = delete;
    task_id_generator& operator=(const task_id_generator&) = delete;

    /// The next id. `priority` is clamped to 0..9 and `now_ms` to 0..9999999999999, so the
    /// result is always a valid id.
    std::string next(int priority, std::int64_t now_ms);

    std::uint32_t client() const noexcept { return client_; }
    /// The client id as 8 lowercase hex digits, as a task's `client` field carries it.
    std::string client_hex() const;

private:
    std::uint32_t client_;
    // Wraps at 2^32, a multiple of 2^24, so masking the low 24 bits wraps modulo 2^24 too.
    std::atomic<std::uint32_t> counter_;
};

/// Most tasks one bundle holds (docs/protocol.md §4.1).
inline constexpr std::size_t max_bundle_tasks = 1000;

/// True when `tid` names a task node: exactly the §3 form (lowercase hex digits), or a
/// bundle's id, that form followed by `_<n>` (n = 1..max_bundle_tasks, no leading zero).
bool is_valid_task_id(std::string_view tid) noexcept;
/// Length of a task id's client part (8 lowercase hex digits).
inline constexpr std::size_t task_client_length = 8;
/// The client part of a valid task id (a bundle's id included): its 8 hex digits after the
/// second '-'; empty for anything else.
std::string_view task_id_client(std::string_view tid) noexcept;
/// True for 8 lowercase hex digits: a client id as task ids and /results/<c> carry it.
bool is_client_id(std::string_view s) noexcept;
/// The priority (0..9) encoded in a valid task id; nullopt for an invalid id.
std::optional<int> task_id_priority(std::string_view tid) noexcept;
/// The time (ms since the Unix epoch) a valid task id was made at: when its client submitted
/// it. nullopt for an invalid id.
std::optional<std::int64_t> task_id_ms(std::string_view tid) noexcept;

/// How many tasks the bundle `tid` holds; 0 for a plain task id (or an invalid one).
std::size_t bundle_size(std::string_view tid) noexcept;
/// The id of a bundle of `n` tasks whose node id would otherwise be `tid` (a plain id).
std::string bundle_id(std::string_view tid, std::size_t n);
/// The id of the `index`-th task of the bundle `bundle`: `<bundle>.<index>`.
std::string bundled_task_id(std::string_view bundle, std::size_t index);

/// What a task id a client holds refers to: a task node (a plain task or a whole bundle),
/// or one task of a bundle.
struct task_ref {
    std::string_view node;             ///< the id naming the node (pending, assigned, result)
    std::optional<std::size_t> index;  ///< set for one task of a bundle
};
/// Parses a plain task id, a bundle id, or `<bundle id>.<index>` with index < the bundle's
/// size (decimal, no leading zero); nullopt for anything else.
std::optional<task_ref> parse_task_ref(std::string_view id) noexcept;

// --- shards (§3) -----------------------------------------------------------------------------

/// A shard's node name: the number with at least two digits ("00", "07", "123").
std::string shard_name(std::uint32_t shard);
/// The shard `tid` belongs to: fnv1a32(tid) % shards; 0 when `shards` is 0.
std::uint32_t shard_of(std::string_view tid, std::uint32_t shards) noexcept;

/// Milliseconds since the Unix epoch (the protocol's `*_ms` fields and task ids).
std::int64_t now_ms() noexcept;

// --- member ids (§2) -------------------------------------------------------------------------

/// Longest host part new_member_id() writes and is_valid_member_id() accepts.
inline constexpr std::size_t max_member_host_length = 253;

/// A new member id `<host>-<pid>-<8 random lowercase hex>`. The host is sanitized: characters
/// other than [A-Za-z0-9._-] become '_', it is cut to max_member_host_length, and an empty one
/// becomes "host". A negative pid is written as 0.
std::string new_member_id(std::string_view host, long pid);
/// True when `id` has the form new_member_id() produces.
bool is_valid_member_id(std::string_view id) noexcept;

// --- election (§7) ---------------------------------------------------------------------------

/// An /election child, parsed.
struct election_node {
    std::string member;
    std::int64_t sequence = 0;

    friend bool operator==(const election_node&, const election_node&) = default;
};

/// The name to create (ephemeral sequential) under /election: "c-<member>-".
std::string election_node_prefix(std::string_view member);
/// Parses "c-<member>-<10 digits>" with a valid member id; nullopt for anything else.
std::optional<election_node> parse_election_node(std::string_view name);

}  // namespace zkd::protocol
