// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace zkd::cli {

/// Sets spdlog's level ("trace".."error", "off") and format: "text" (one readable line per
/// event) or "json" (one JSON object per line: time, level, msg). Throws usage_error, which
/// names the settings as `level_source` and `format_source` (args::source).
void setup_logging(
    const std::string& level,
    const std::string& format,
    const std::string& level_source = "--log-level",
    const std::string& format_source = "--log-format"
);

/// `s` as a JSON string literal, quotes included.
std::string json_quote(const std::string& s);

}  // namespace zkd::cli
