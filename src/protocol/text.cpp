// SPDX-License-Identifier: MIT
#include "protocol/text.hpp"

namespace zkd::protocol {

std::size_t utf8_char(std::string_view s, std::size_t i) noexcept {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned c = b(0);
    std::size_t len = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xBF;
    if (c < 0x80U) {
        return 1;
    }
    if (c >= 0xC2U && c <= 0xDFU) {
        len = 2;
    } else if (c >= 0xE0U && c <= 0xEFU) {
        len = 3;
        lo = c == 0xE0U ? 0xA0U : 0x80U;  // no overlong form
        hi = c == 0xEDU ? 0x9FU : 0xBFU;  // no surrogate
    } else if (c >= 0xF0U && c <= 0xF4U) {
        len = 4;
        lo = c == 0xF0U ? 0x90U : 0x80U;  // no overlong form
        hi = c == 0xF4U ? 0x8FU : 0xBFU;  // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (i + len > s.size() || b(1) < lo || b(1) > hi) {
        return 0;
    }
    for (std::size_t k = 2; k < len; ++k) {
        if ((b(k) & 0xC0U) != 0x80U) {
            return 0;
        }
    }
    return len;
}

bool is_utf8(std::string_view s) noexcept {
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t len = utf8_char(s, i);
        if (len == 0) {
            return false;
        }
        i += len;
    }
    return true;
}

std::string printable_utf8(std::string_view s, std::string_view replacement) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t len = utf8_char(s, i);
        if (len == 0) {
            out += replacement;
            ++i;
        } else {
            out.append(s.substr(i, len));
            i += len;
        }
    }
    return out;
}

void cut_utf8(std::string& s, std::size_t n) {
    if (s.size() <= n) {
        return;
    }
    // s[n] is the first byte dropped: while it continues a character, that character would
    // be cut short, so it goes too (at most three bytes back: a character has four).
    std::size_t keep = n;
    for (int back = 0;
         back < 3 && keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0U) == 0x80U; ++back) {
        --keep;
    }
    if ((static_cast<unsigned char>(s[keep]) & 0xC0U) == 0x80U) {
        keep = n;  // not UTF-8 there anyway: a plain cut
    }
    s.resize(keep);
}

}  // namespace zkd::protocol
