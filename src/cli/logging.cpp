// SPDX-License-Identifier: MIT
#include "cli/logging.hpp"

#include "cli/options.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <memory>

namespace zkd::cli {

namespace {

/// {"time":"2026-11-21T16:30:00.123Z","level":"info","msg":"..."} per line.
class json_formatter final : public spdlog::formatter {
public:
    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        const auto t = msg.time.time_since_epoch();
        const auto secs = std::chrono::duration_cast<std::chrono::seconds>(t);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
        const std::time_t tt = secs.count();
        std::tm tm{};
        ::gmtime_r(&tt, &tm);
        char stamp[40];
        const auto n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        std::string line = R"({"time":")";
        line.append(stamp, n);
        line += '.';
        line += std::to_string(1000 + ms).substr(1);
        line += R"(Z","level":")";
        const auto level = spdlog::level::to_string_view(msg.level);
        line.append(level.data(), level.size());
        line += R"(","msg":)";
        line += json_quote(std::string(msg.payload.data(), msg.payload.size()));
        line += "}\n";
        dest.append(line.data(), line.data() + line.size());
    }
    [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
        return std::make_unique<json_formatter>();
    }
};

}  // namespace

std::string json_quote(const std::string& s) {
    return boost::json::serialize(boost::json::string(s));
}

void setup_logging(
    const std::string& level,
    const std::string& format,
    const std::string& level_source,
    const std::string& format_source
) {
    const auto lv = spdlog::level::from_str(level);
    if (lv == spdlog::level::off && level != "off") {
        throw usage_error(
            level_source + " wants trace, debug, info, warn, error or off, not '" + level + "'"
        );
    }
    spdlog::set_level(lv);
    if (format == "json") {
        spdlog::set_formatter(std::make_unique<json_formatter>());
    } else if (format == "text") {
        spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
    } else {
        throw usage_error(format_source + " wants text or json, not '" + format + "'");
    }
}

}  // namespace zkd::cli
