// SPDX-License-Identifier: MIT
#include "protocol/layout.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"

#include <algorithm>
#include <initializer_list>

namespace zkd::protocol {

namespace {

std::string path(std::initializer_list<std::string_view> segments) {
    std::size_t n = 0;
    for (const auto s : segments)
        n += s.size() + 1;
    std::string p;
    p.reserve(n);
    for (const auto s : segments)
        p.append("/").append(s);
    return p;
}

}  // namespace

std::string chroot_path(std::string_view ns) {
    return path({"zkd", ns});
}

bool is_cancel_marker(std::string_view name) noexcept {
    return name.size() > cancel_marker_suffix.size() && name.ends_with(cancel_marker_suffix);
}

std::string_view marker_task(std::string_view name) noexcept {
    if (!is_cancel_marker(name))
        return {};
    return name.substr(0, name.size() - cancel_marker_suffix.size());
}

layout layout::from(const meta_info& meta) noexcept {
    return layout{meta.pending_shards, meta.result_shards};
}

std::string layout::election_prefix(std::string_view member) {
    return path({"election", election_node_prefix(member)});
}

std::string layout::worker(std::string_view member) {
    return path({"workers", member});
}

bool is_logged_dir(std::string_view dir) noexcept {
    for (const std::string_view top :
         {std::string_view("/pending/"), std::string_view("/assign/"),
          std::string_view("/delayed/")}) {
        if (dir.size() > top.size() && dir.starts_with(top)) {
            return dir.find('/', top.size()) == std::string_view::npos;
        }
    }
    return is_client_results_dir(dir);
}

bool is_client_results_dir(std::string_view dir) noexcept {
    constexpr std::string_view results = "/results/";
    return dir.starts_with(results) && layout::is_client_results(dir.substr(results.size()));
}

std::string layout::assign_dir(std::string_view member) {
    return path({"assign", member});
}

std::string layout::assignment(std::string_view member, std::string_view tid) {
    return path({"assign", member, tid});
}

std::string layout::cancel_marker(std::string_view member, std::string_view tid) {
    std::string p = assignment(member, tid);
    p.append(cancel_marker_suffix);
    return p;
}

std::string layout::pending_shard(std::uint32_t i) {
    return path({"pending", shard_name(i)});
}

std::string layout::pending_task(std::string_view tid) const {
    return path({"pending", shard_name(shard_of(tid, std::max(pending_shards, 1U))), tid});
}

std::vector<std::string> layout::pending_shard_paths() const {
    std::vector<std::string> paths;
    const auto n = std::max(pending_shards, 1U);
    paths.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i)
        paths.push_back(pending_shard(i));
    return paths;
}

std::string layout::delayed_shard(std::uint32_t i) {
    return path({"delayed", shard_name(i)});
}

std::string layout::delayed_task(std::string_view tid) const {
    return path({"delayed", shard_name(shard_of(tid, std::max(pending_shards, 1U))), tid});
}

bool layout::is_delayed_shard(std::string_view dir) noexcept {
    constexpr std::string_view top = "/delayed/";
    return dir.size() > top.size() && dir.starts_with(top) &&
           dir.find('/', top.size()) == std::string_view::npos;
}

std::string layout::result_shard(std::uint32_t i) {
    return path({"results", shard_name(i)});
}

std::string layout::client_results(std::string_view client) {
    return path({"results", client});
}

bool layout::is_client_results(std::string_view name) noexcept {
    return is_client_id(name);
}

std::string layout::result_dir(std::string_view tid) const {
    if (const auto client = task_id_client(tid); !client.empty())
        return client_results(client);
    return result_shard(shard_of(tid, std::max(result_shards, 1U)));
}

std::string layout::result(std::string_view tid) const {
    std::string p = result_dir(tid);
    p.append("/").append(tid);
    return p;
}

std::vector<std::string> layout::result_shard_paths() const {
    std::vector<std::string> paths;
    const auto n = std::max(result_shards, 1U);
    paths.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i)
        paths.push_back(result_shard(i));
    return paths;
}

std::string layout::cancel_request(std::string_view tid) {
    return path({"cancel", tid});
}

std::vector<std::string> layout::fixed_nodes() const {
    std::vector<std::string> nodes{meta(),        epoch(),      election_dir(),
                                   workers_dir(), assign_dir(), pending_dir()};
    for (auto& p : pending_shard_paths())
        nodes.push_back(std::move(p));
    nodes.push_back(results_dir());
    for (auto& p : result_shard_paths())
        nodes.push_back(std::move(p));
    nodes.push_back(cancel_dir());
    nodes.push_back(receipts_dir());
    // Last: a namespace made before the delayed tree gets it from the next zkd run.
    nodes.push_back(delayed_dir());
    for (std::uint32_t i = 0; i < std::max(pending_shards, 1U); ++i)
        nodes.push_back(delayed_shard(i));
    return nodes;
}

}  // namespace zkd::protocol
