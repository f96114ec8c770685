// SPDX-License-Identifier: MIT
// Every znode path of docs/protocol.md §2, relative to the cluster's chroot.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

struct meta_info;

/// The cluster's chroot for `ns`: "/zkd/<ns>" (§1). `ns` is not checked.
std::string chroot_path(std::string_view ns);

/// The suffix of a cancel marker's name: "<tid>.cancel".
inline constexpr std::string_view cancel_marker_suffix = ".cancel";

/// True for a child name of /assign/<member> that is a cancel marker ("<tid>.cancel", with a
/// non-empty <tid>).
bool is_cancel_marker(std::string_view name) noexcept;
/// The task id of a cancel marker's name; empty when `name` is not a marker.
std::string_view marker_task(std::string_view name) noexcept;

/// True for a directory whose children are created with a change log in its data (§6
/// "Change logs"): "/pending/<s>", "/delayed/<s>", "/assign/<member>" and a client's
/// "/results/<c>".
bool is_logged_dir(std::string_view dir) noexcept;

/// True for "/results/<c>", a client's results directory (layout::is_client_results): the
/// one kind of directory that is made on demand, so a writer whose create finds it missing
/// makes it in the same transaction (§2).
bool is_client_results_dir(std::string_view dir) noexcept;

/// The paths of a cluster with the given shard counts (from /meta). A shard count of 0 acts
/// as 1 (never a division by zero).
struct layout {
    std::uint32_t pending_shards = 16;
    std::uint32_t result_shards = 16;

    /// The layout /meta declares.
    static layout from(const meta_info& meta) noexcept;

    static std::string meta() { return "/meta"; }
    static std::string epoch() { return "/epoch"; }

    static std::string election_dir() { return "/election"; }
    /// "/election/c-<member>-": the path to create, ephemeral sequential.
    static std::string election_prefix(std::string_view member);
    static std::string master() { return "/master"; }

    static std::string workers_dir() { return "/workers"; }
    static std::string worker(std::string_view member);

    /// "/assign"
    static std::string assign_dir() { return "/assign"; }
    /// "/assign/<member>": a worker's assignment directory.
    static std::string assign_dir(std::string_view member);
    static std::string assignment(std::string_view member, std::string_view tid);
    /// "/assign/<member>/<tid>.cancel"
    static std::string cancel_marker(std::string_view member, std::string_view tid);

    static std::string pending_dir() { return "/pending"; }
    /// "/pending/<shard_name(i)>"; `i` is not checked against pending_shards.
    static std::string pending_shard(std::uint32_t i);
    /// "/pending/<s>/<tid>", the shard computed from the id.
    std::string pending_task(std::string_view tid) const;
    /// Every pending shard, in shard order.
    std::vector<std::string> pending_shard_paths() const;

    /// "/delayed": the delayed tasks and retries waiting for their time (§4.3).
    static std::string delayed_dir() { return "/delayed"; }
    /// "/delayed/<shard_name(i)>"; `i` is not checked against pending_shards (the delayed
    /// tree has as many shards as pending).
    static std::string delayed_shard(std::uint32_t i);
    /// "/delayed/<s>/<tid>", the shard computed from the id as for pending.
    std::string delayed_task(std::string_view tid) const;
    /// True for "/delayed/<s>" (any shard name).
    static bool is_delayed_shard(std::string_view dir) noexcept;

    static std::string results_dir() { return "/results"; }
    /// "/results/<shard_name(i)>"; `i` is not checked against result_shards. The result
    /// shards hold the results of pending nodes whose names are not task ids (§8).
    static std::string result_shard(std::uint32_t i);
    /// "/results/<c>": the results directory of the client whose id is `client` (8 hex
    /// digits, not checked), made when its first result is written (§2).
    static std::string client_results(std::string_view client);
    /// Where the result of the task node `tid` goes: its client's directory for a task id
    /// (a bundle's included), else the result shard computed from the name.
    std::string result_dir(std::string_view tid) const;
    /// "<result_dir(tid)>/<tid>".
    std::string result(std::string_view tid) const;
    /// Every result shard, in shard order.
    std::vector<std::string> result_shard_paths() const;
    /// True for a child name of /results that names a client's directory (is_client_id),
    /// not a result shard.
    static bool is_client_results(std::string_view name) noexcept;

    static std::string cancel_dir() { return "/cancel"; }

    /// "/receipts": clients' receipts (ephemeral), which make a lost submit decidable (T1).
    static std::string receipts_dir() { return "/receipts"; }
    static std::string cancel_request(std::string_view tid);

    /// Every persistent node the first process creates, parents first: /meta, /epoch, the
    /// directories, and each shard. /meta comes first because it decides the rest; its data
    /// (and /epoch's) is the caller's to supply.
    std::vector<std::string> fixed_nodes() const;

    friend bool operator==(const layout&, const layout&) = default;
};

}  // namespace zkd::protocol
