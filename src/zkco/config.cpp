// SPDX-License-Identifier: MIT
#include "zkco/config.hpp"

#include <cctype>
#include <charconv>

namespace zkd::zkco {
namespace {

result<server_address> parse_server(std::string_view s) {
    const error_code bad = errc::bad_arguments;
    server_address out;
    std::string_view port_text;
    if (!s.empty() && s.front() == '[') {
        const auto close = s.find(']');
        if (close == std::string_view::npos) {
            return bad;
        }
        out.host = std::string(s.substr(1, close - 1));
        if (out.host.find(':') == std::string::npos) {
            return bad;  // brackets are for IPv6 literals ("[abc%1]" could not be written back)
        }
        const std::string_view rest = s.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') {
                return bad;
            }
            port_text = rest.substr(1);
            if (port_text.empty()) {
                return bad;
            }
        }
    } else {
        const auto colon = s.rfind(':');
        if (colon != std::string_view::npos) {
            if (s.find(':') != colon) {
                return bad;  // bare IPv6 needs brackets
            }
            out.host = std::string(s.substr(0, colon));
            port_text = s.substr(colon + 1);
            if (port_text.empty()) {
                return bad;
            }
        } else {
            out.host = std::string(s);
        }
    }
    if (out.host.empty()) {
        return bad;
    }
    // Host names and addresses only: letters, digits, '.', '-', '_' (and ':' and a '%zone'
    // inside brackets). Anything else is a typo the resolver would only report much later.
    const bool bracketed = s.front() == '[';
    for (const char c : out.host) {
        const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' ||
                        c == '_' || (bracketed && (c == ':' || c == '%'));
        if (!ok) {
            return bad;
        }
    }
    if (!port_text.empty()) {
        unsigned value = 0;
        const auto [ptr, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (ec != std::errc{} || ptr != port_text.data() + port_text.size() || value == 0 ||
            value > 65535) {
            return bad;
        }
        out.port = static_cast<std::uint16_t>(value);
    }
    return out;
}

}  // namespace

result<connect_string_parts> parse_connect_string(std::string_view s) {
    connect_string_parts out;
    const auto slash = s.find('/');
    std::string_view hosts = s.substr(0, slash);
    if (slash != std::string_view::npos) {
        const std::string_view chroot = s.substr(slash);
        if (chroot != "/") {
            if (validate_path(chroot)) {
                return error_code(errc::bad_arguments);
            }
            out.chroot = std::string(chroot);
        }
    }
    if (hosts.empty()) {
        return error_code(errc::bad_arguments);
    }
    while (true) {
        const auto comma = hosts.find(',');
        auto server = parse_server(hosts.substr(0, comma));
        if (!server) {
            return server.error();
        }
        out.servers.push_back(std::move(*server));
        if (comma == std::string_view::npos) {
            break;
        }
        hosts.remove_prefix(comma + 1);
    }
    return out;
}

std::string format_connect_string(const connect_string_parts& parts) {
    std::string out;
    for (const auto& s : parts.servers) {
        if (!out.empty()) {
            out.push_back(',');
        }
        if (s.host.find(':') != std::string::npos) {
            out.append("[").append(s.host).append("]");
        } else {
            out.append(s.host);
        }
        out.append(":").append(std::to_string(s.port));
    }
    out.append(parts.chroot);
    return out;
}

}  // namespace zkd::zkco
