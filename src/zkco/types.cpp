// SPDX-License-Identifier: MIT
#include "zkco/types.hpp"

#include <boost/uuid/detail/sha1.hpp>

#include <array>
#include <charconv>

namespace zkd::zkco {

bool is_sequential(create_mode m) noexcept {
    return m == create_mode::persistent_sequential || m == create_mode::ephemeral_sequential ||
           m == create_mode::persistent_sequential_with_ttl;
}

bool is_ttl(create_mode m) noexcept {
    return m == create_mode::persistent_with_ttl ||
           m == create_mode::persistent_sequential_with_ttl;
}

acl_list open_acl() {
    return {{perms::all, "world", "anyone"}};
}
acl_list creator_all_acl() {
    return {{perms::all, "auth", ""}};
}
acl_list read_acl() {
    return {{perms::read, "world", "anyone"}};
}

namespace {
std::string base64(const unsigned char* data, std::size_t n) {
    static constexpr std::string_view alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((n + 2) / 3 * 4);
    for (std::size_t i = 0; i < n; i += 3) {
        const std::uint32_t b0 = data[i];
        const std::uint32_t b1 = i + 1 < n ? data[i + 1] : 0;
        const std::uint32_t b2 = i + 2 < n ? data[i + 2] : 0;
        const std::uint32_t triple = (b0 << 16) | (b1 << 8) | b2;
        out.push_back(alphabet[(triple >> 18) & 63]);
        out.push_back(alphabet[(triple >> 12) & 63]);
        out.push_back(i + 1 < n ? alphabet[(triple >> 6) & 63] : '=');
        out.push_back(i + 2 < n ? alphabet[triple & 63] : '=');
    }
    return out;
}
}  // namespace

std::string digest_id(std::string_view user, std::string_view password) {
    std::string credentials;
    credentials.reserve(user.size() + 1 + password.size());
    credentials.append(user).append(":").append(password);
    boost::uuids::detail::sha1 sha;
    sha.process_bytes(credentials.data(), credentials.size());
    boost::uuids::detail::sha1::digest_type words{};
    sha.get_digest(words);
    std::array<unsigned char, 20> bytes{};
    for (std::size_t i = 0; i < 5; ++i) {
        for (std::size_t j = 0; j < 4; ++j) {
            bytes[i * 4 + j] = static_cast<unsigned char>((words[i] >> (24 - 8 * j)) & 0xff);
        }
    }
    return std::string(user) + ":" + base64(bytes.data(), bytes.size());
}

std::string_view to_string(event_type t) noexcept {
    switch (t) {
    case event_type::created:
        return "created";
    case event_type::deleted:
        return "deleted";
    case event_type::changed:
        return "changed";
    case event_type::child:
        return "child";
    }
    return "unknown";
}

std::string_view to_string(session_state s) noexcept {
    switch (s) {
    case session_state::connecting:
        return "connecting";
    case session_state::connected:
        return "connected";
    case session_state::disconnected:
        return "disconnected";
    case session_state::expired:
        return "expired";
    case session_state::auth_failed:
        return "auth_failed";
    case session_state::closed:
        return "closed";
    }
    return "unknown";
}

bool is_terminal(session_state s) noexcept {
    return s == session_state::expired || s == session_state::auth_failed ||
           s == session_state::closed;
}

std::optional<std::size_t> multi_result::failed_op() const noexcept {
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].ec && results[i].ec != errc::runtime_inconsistency) {
            return i;
        }
    }
    return std::nullopt;
}

std::size_t estimated_size(const multi_op& op) noexcept {
    return std::visit(
        [](const auto& o) -> std::size_t {
            using T = std::decay_t<decltype(o)>;
            // Per-op header (type, done, err) + length prefixes + version/flags, rounded up.
            constexpr std::size_t overhead = 32;
            std::size_t n = overhead + o.path.size();
            if constexpr (std::is_same_v<T, op::create>) {
                n += o.data.size();
                for (const auto& a : o.acl) {
                    n += 12 + a.scheme.size() + a.id.size();
                }
                n += o.acl.empty() ? 32 : 0;
            } else if constexpr (std::is_same_v<T, op::set>) {
                n += o.data.size();
            }
            return n;
        },
        op
    );
}

error_code validate_path(std::string_view path) noexcept {
    const error_code bad = errc::bad_arguments;
    if (path.empty() || path.front() != '/') {
        return bad;
    }
    if (path == "/") {
        return {};
    }
    if (path.back() == '/') {
        return bad;
    }
    std::size_t start = 1;
    while (start <= path.size()) {
        const std::size_t end = std::min(path.find('/', start), path.size());
        const std::string_view seg = path.substr(start, end - start);
        if (seg.empty() || seg == "." || seg == "..") {
            return bad;
        }
        for (const char c : seg) {
            if (c == '\0') {
                return bad;
            }
        }
        start = end + 1;
    }
    return {};
}

std::string join_path(std::string_view parent, std::string_view child) {
    std::string out(parent);
    if (out.empty() || out.back() != '/') {
        out.push_back('/');
    }
    out.append(child);
    return out;
}

std::string_view parent_path(std::string_view path) noexcept {
    const auto pos = path.rfind('/');
    if (pos == std::string_view::npos || pos == 0) {
        return "/";
    }
    return path.substr(0, pos);
}

std::string_view base_name(std::string_view path) noexcept {
    const auto pos = path.rfind('/');
    return pos == std::string_view::npos ? path : path.substr(pos + 1);
}

std::optional<std::int64_t> sequence_number(std::string_view name) noexcept {
    constexpr std::size_t digits = 10;
    if (name.size() < digits) {
        return std::nullopt;
    }
    const std::string_view tail = name.substr(name.size() - digits);
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), value);
    if (ec != std::errc{} || ptr != tail.data() + tail.size() || tail.front() == '-' ||
        tail.front() == '+') {
        return std::nullopt;
    }
    return value;
}

}  // namespace zkd::zkco
