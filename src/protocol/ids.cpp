// SPDX-License-Identifier: MIT
#include "protocol/ids.hpp"

#include "protocol/task.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <random>

namespace zkd::protocol {

namespace {

constexpr std::int64_t max_id_ms = 9'999'999'999'999;  // 13 digits
constexpr std::size_t election_digits = 10;

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}
bool is_lower_hex(char c) noexcept {
    return is_digit(c) || (c >= 'a' && c <= 'f');
}
bool is_host_char(char c) noexcept {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '_' || c == '-';
}

bool all_of(std::string_view s, bool (*pred)(char) noexcept) noexcept {
    return std::all_of(s.begin(), s.end(), pred);
}

// Writes `value` as exactly `width` lowercase hex digits (the low 4*width bits).
void append_hex(std::string& out, std::uint64_t value, int width) {
    static constexpr std::string_view digits = "0123456789abcdef";
    for (int shift = (width - 1) * 4; shift >= 0; shift -= 4) {
        out.push_back(digits[(value >> shift) & 0xfU]);
    }
}

// Writes `value` (>= 0) with at least `width` digits, zero-padded.
void append_padded(std::string& out, std::uint64_t value, std::size_t width) {
    std::array<char, 24> buf{};
    const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
    const auto n = static_cast<std::size_t>(end - buf.data());
    if (n < width)
        out.append(width - n, '0');
    out.append(buf.data(), n);
}

std::uint32_t random_u32() {
    // random_device is /dev/urandom (or RDRAND) on Linux: fresh per call, fine at these rates.
    std::random_device rd;
    return static_cast<std::uint32_t>(rd());
}

}  // namespace

std::uint32_t fnv1a32(std::string_view s) noexcept {
    std::uint32_t h = 2166136261U;
    for (const char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 16777619U;
    }
    return h;
}

// --- task ids --------------------------------------------------------------------------------

task_id_generator::task_id_generator() : task_id_generator(random_u32()) {}

task_id_generator::task_id_generator(std::uint32_t client, std::uint32_t first_counter) noexcept
    : client_(client), counter_(first_counter) {}

std::string task_id_generator::next(int priority, std::int64_t now_ms) {
    const int p = std::clamp(priority, min_priority, max_priority);
    const auto ms = static_cast<std::uint64_t>(std::clamp<std::int64_t>(now_ms, 0, max_id_ms));
    const std::uint32_t counter = counter_.fetch_add(1, std::memory_order_relaxed) & 0xffffffU;
    std::string id;
    id.reserve(task_id_length);
    id.push_back('t');
    id.push_back(static_cast<char>('0' + (9 - p)));
    id.push_back('-');
    append_padded(id, ms, 13);
    id.push_back('-');
    append_hex(id, client_, 8);
    append_hex(id, counter, 6);
    return id;
}

std::string task_id_generator::client_hex() const {
    std::string out;
    append_hex(out, client_, 8);
    return out;
}

namespace {

bool is_plain_task_id(std::string_view tid) noexcept {
    return tid.size() == task_id_length && tid[0] == 't' && is_digit(tid[1]) && tid[2] == '-' &&
           all_of(tid.substr(3, 13), is_digit) && tid[16] == '-' &&
           all_of(tid.substr(17, 14), is_lower_hex);
}

// A decimal number without a leading zero, at most `max`; nullopt otherwise.
std::optional<std::size_t> parse_count(std::string_view s, std::size_t max) noexcept {
    if (s.empty() || s.size() > 4 || !all_of(s, is_digit) || (s.size() > 1 && s[0] == '0')) {
        return std::nullopt;
    }
    std::size_t n = 0;
    std::from_chars(s.data(), s.data() + s.size(), n);
    if (n > max)
        return std::nullopt;
    return n;
}

}  // namespace

bool is_valid_task_id(std::string_view tid) noexcept {
    return is_plain_task_id(tid) || bundle_size(tid) > 0;
}

std::size_t bundle_size(std::string_view tid) noexcept {
    if (tid.size() < task_id_length + 2 || tid[task_id_length] != '_' ||
        !is_plain_task_id(tid.substr(0, task_id_length))) {
        return 0;
    }
    const auto n = parse_count(tid.substr(task_id_length + 1), max_bundle_tasks);
    return n.value_or(0);
}

std::string bundle_id(std::string_view tid, std::size_t n) {
    std::string id(tid);
    id.push_back('_');
    append_padded(id, n, 1);
    return id;
}

std::string bundled_task_id(std::string_view bundle, std::size_t index) {
    std::string id(bundle);
    id.push_back('.');
    append_padded(id, index, 1);
    return id;
}

std::optional<task_ref> parse_task_ref(std::string_view id) noexcept {
    if (is_valid_task_id(id))
        return task_ref{id, std::nullopt};
    const auto dot = id.rfind('.');
    if (dot == std::string_view::npos)
        return std::nullopt;
    const auto node = id.substr(0, dot);
    const auto n = bundle_size(node);
    if (n == 0)
        return std::nullopt;
    const auto index = parse_count(id.substr(dot + 1), n - 1);
    if (!index)
        return std::nullopt;
    return task_ref{node, index};
}

std::string_view task_id_client(std::string_view tid) noexcept {
    // t<P>-<13 digits>-<client>...: the client starts after 1 + 1 + 1 + 13 + 1 characters.
    constexpr std::size_t at = 17;
    if (!is_valid_task_id(tid))
        return {};
    return tid.substr(at, task_client_length);
}

bool is_client_id(std::string_view s) noexcept {
    return s.size() == task_client_length && all_of(s, is_lower_hex);
}

std::optional<int> task_id_priority(std::string_view tid) noexcept {
    if (!is_valid_task_id(tid))
        return std::nullopt;
    return 9 - (tid[1] - '0');
}

std::optional<std::int64_t> task_id_ms(std::string_view tid) noexcept {
    // t<P>-<13 digits>-...: the digits start after 1 + 1 + 1 characters.
    constexpr std::size_t at = 3;
    constexpr std::size_t digits = 13;
    if (!is_valid_task_id(tid))
        return std::nullopt;
    std::int64_t ms = 0;
    for (const char c : tid.substr(at, digits)) {
        ms = ms * 10 + (c - '0');
    }
    return ms;
}

// --- shards ----------------------------------------------------------------------------------

std::string shard_name(std::uint32_t shard) {
    std::string out;
    append_padded(out, shard, 2);
    return out;
}

std::uint32_t shard_of(std::string_view tid, std::uint32_t shards) noexcept {
    return shards == 0 ? 0 : fnv1a32(tid) % shards;
}

// --- member ids ------------------------------------------------------------------------------

std::string new_member_id(std::string_view host, long pid) {
    std::string id;
    const auto h = host.substr(0, max_member_host_length);
    if (h.empty()) {
        id = "host";
    } else {
        id.reserve(h.size() + 30);
        for (const char c : h)
            id.push_back(is_host_char(c) ? c : '_');
    }
    id.push_back('-');
    append_padded(id, static_cast<std::uint64_t>(std::max(pid, 0L)), 1);
    id.push_back('-');
    append_hex(id, random_u32(), 8);
    return id;
}

bool is_valid_member_id(std::string_view id) noexcept {
    // Parsed from the right: the host may itself contain '-'.
    if (id.size() < 1 + 1 + 1 + 1 + 8)
        return false;
    const auto rand = id.substr(id.size() - 8);
    if (!all_of(rand, is_lower_hex) || id[id.size() - 9] != '-')
        return false;
    const auto rest = id.substr(0, id.size() - 9);
    const auto dash = rest.rfind('-');
    if (dash == std::string_view::npos)
        return false;
    const auto pid = rest.substr(dash + 1);
    const auto host = rest.substr(0, dash);
    return !pid.empty() && pid.size() <= 19 && all_of(pid, is_digit) && !host.empty() &&
           host.size() <= max_member_host_length && all_of(host, is_host_char);
}

// --- election --------------------------------------------------------------------------------

std::string election_node_prefix(std::string_view member) {
    std::string name;
    name.reserve(member.size() + 3);
    name.append("c-").append(member).push_back('-');
    return name;
}

std::optional<election_node> parse_election_node(std::string_view name) {
    if (name.size() < 2 + 1 + election_digits || !name.starts_with("c-"))
        return std::nullopt;
    const auto seq = name.substr(name.size() - election_digits);
    if (!all_of(seq, is_digit) || name[name.size() - election_digits - 1] != '-') {
        return std::nullopt;
    }
    const auto member = name.substr(2, name.size() - 2 - election_digits - 1);
    if (!is_valid_member_id(member))
        return std::nullopt;
    election_node node;
    node.member = std::string(member);
    std::from_chars(seq.data(), seq.data() + seq.size(), node.sequence);  // 10 digits fit
    return node;
}

std::int64_t now_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()
    )
        .count();
}

}  // namespace zkd::protocol
