// SPDX-License-Identifier: MIT
#include "apps/crack/words.hpp"

#include "protocol/text.hpp"

#include <cstdint>
#include <map>
#include <set>

namespace zkd::crack {

std::optional<std::string> normalize_hash(std::string_view h) {
    if (h.size() != 32) {
        return std::nullopt;
    }
    std::string out;
    for (const char c : h) {
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
            out += c;
        } else if (c >= 'A' && c <= 'F') {
            out += static_cast<char>(c - 'A' + 'a');
        } else {
            return std::nullopt;
        }
    }
    return out;
}

std::optional<std::string> named_charset(std::string_view name) {
    static const std::map<std::string_view, std::string> sets = [] {
        std::string printable;
        for (char c = 0x20; c < 0x7f; ++c) {
            printable += c;
        }
        const std::string lower = "abcdefghijklmnopqrstuvwxyz";
        const std::string upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        const std::string digits = "0123456789";
        return std::map<std::string_view, std::string>{
            {"lower", lower},
            {"upper", upper},
            {"digits", digits},
            {"alpha", lower + upper},
            {"alnum", lower + upper + digits},
            {"hex", "0123456789abcdef"},
            {"printable", printable},
        };
    }();
    std::string out;
    std::set<char> have;
    while (!name.empty()) {
        const auto plus = name.find('+');
        const auto part = name.substr(0, plus);
        const auto it = sets.find(part);
        if (it == sets.end()) {
            return std::nullopt;
        }
        for (const char c : it->second) {
            if (have.insert(c).second) {
                out += c;
            }
        }
        if (plus == std::string_view::npos) {
            break;
        }
        name.remove_prefix(plus + 1);
        if (name.empty()) {
            return std::nullopt;  // a trailing '+'
        }
    }
    if (out.empty()) {
        return std::nullopt;
    }
    return out;
}

std::vector<std::string> parse_word_list(std::string_view text, std::size_t* skipped) {
    std::vector<std::string> words;
    std::size_t bad = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        auto line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (line.empty()) {
            continue;
        }
        if (!protocol::is_utf8(line)) {
            ++bad;
            continue;
        }
        words.emplace_back(line);
    }
    if (skipped != nullptr) {
        *skipped = bad;
    }
    return words;
}

}  // namespace zkd::crack
