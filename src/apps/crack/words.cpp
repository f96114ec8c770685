// SPDX-License-Identifier: MIT
#include "apps/crack/words.hpp"

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

bool valid_utf8(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1FU;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0FU;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07U;
        } else {
            return false;
        }
        if (len > s.size() - i) {
            return false;
        }
        for (std::size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0U) != 0x80U) {
                return false;
            }
            cp = (cp << 6U) | (cc & 0x3FU);
        }
        if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) {
            return false;
        }
        if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) {
            return false;
        }
        i += len;
    }
    return true;
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
        if (!valid_utf8(line)) {
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
