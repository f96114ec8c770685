// SPDX-License-Identifier: MIT
#include "workflow/ids.hpp"

#include "protocol/ids.hpp"
#include "protocol/layout.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

namespace zkd::workflow {

namespace {

constexpr std::int64_t max_ms = 9'999'999'999'999;

bool all_digits(std::string_view s) noexcept {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

template <class T>
std::optional<T> parse_number(std::string_view s, int base) noexcept {
    T v{};
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, v, base);
    if (ec != std::errc{} || p != end) {
        return std::nullopt;
    }
    return v;
}

}  // namespace

std::string client_hex(std::uint32_t client) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", client);
    return buf;
}

std::string workflow_id(workflow_ref w) {
    char buf[40];
    std::snprintf(
        buf, sizeof buf, "wf-%013lld-%08x",
        static_cast<long long>(std::clamp<std::int64_t>(w.created_ms, 0, max_ms)), w.client
    );
    return buf;
}

std::optional<workflow_ref> parse_workflow_id(std::string_view id) noexcept {
    if (id.size() != workflow_id_length || id.substr(0, 3) != "wf-" || id[16] != '-') {
        return std::nullopt;
    }
    const auto ms = id.substr(3, 13);
    const auto client = id.substr(17, 8);
    if (!all_digits(ms) || !protocol::is_client_id(client)) {
        return std::nullopt;
    }
    auto m = parse_number<std::int64_t>(ms, 10);
    auto c = parse_number<std::uint32_t>(client, 16);
    if (!m || !c) {
        return std::nullopt;
    }
    return workflow_ref{*m, *c};
}

std::string step_task_id(workflow_ref w, int priority, std::uint64_t k) {
    const auto ms = std::clamp<std::int64_t>(
        w.created_ms + static_cast<std::int64_t>((k % max_task_number) >> 24), 0, max_ms
    );
    char buf[48];
    std::snprintf(
        buf, sizeof buf, "t%d-%013lld-%08x%06x", 9 - std::clamp(priority, 0, 9),
        static_cast<long long>(ms), w.client, static_cast<unsigned>(k & 0xffffffU)
    );
    return buf;
}

std::optional<std::uint64_t> task_number(workflow_ref w, std::string_view tid) noexcept {
    if (tid.size() != protocol::task_id_length || !protocol::is_valid_task_id(tid)) {
        return std::nullopt;
    }
    const auto client = parse_number<std::uint32_t>(tid.substr(17, 8), 16);
    const auto counter = parse_number<std::uint32_t>(tid.substr(25, 6), 16);
    const auto ms = protocol::task_id_ms(tid);
    if (!client || !counter || !ms || *client != w.client) {
        return std::nullopt;
    }
    const auto hi = *ms - w.created_ms;
    if (hi < 0 || static_cast<std::uint64_t>(hi) >= (max_task_number >> 24)) {
        return std::nullopt;
    }
    return (static_cast<std::uint64_t>(hi) << 24) | *counter;
}

std::string workflows_dir() {
    return "/workflows";
}

std::vector<std::string> without_workflow_results(
    std::vector<std::string> dirs, const std::vector<std::string>& workflows
) {
    std::set<std::string, std::less<>> owned;
    for (const auto& name : workflows) {
        if (const auto w = parse_workflow_id(name)) {
            owned.insert(protocol::layout::client_results(client_hex(w->client)));
        }
    }
    std::erase_if(dirs, [&](const std::string& d) { return owned.contains(d); });
    return dirs;
}

}  // namespace zkd::workflow
