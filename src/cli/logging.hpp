// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace zkd::cli {

/// Sets spdlog's level ("trace".."error", "off") and format: "text" (one readable line per
/// event) or "json" (one JSON object per line: time, level, msg). Throws usage_error.
void setup_logging(const std::string& level, const std::string& format);

/// `s` as a JSON string literal, quotes included.
std::string json_quote(const std::string& s);

}  // namespace zkd::cli
