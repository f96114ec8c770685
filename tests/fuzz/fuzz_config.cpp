// SPDX-License-Identifier: MIT
// The config file (`zkd --config FILE`, README "Configuration"): cli::parse_config, then the
// value parsers its keys go through (durations, the ZooKeeper connect string, the HTTP
// listen address). Bad input is a usage_error, never a crash; a duration is never negative.
#include "fuzz_common.hpp"

#include "cli/options.hpp"
#include "http/api.hpp"
#include "zkco/config.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd;
    std::map<std::string, std::string> keys;
    try {
        keys = cli::parse_config(fuzz::as_text(data, size), "fuzz.conf");
    } catch (const cli::usage_error& e) {
        FUZZ_CHECK(std::string_view(e.what()).starts_with("fuzz.conf:"));
        return 0;
    }
    for (const auto& [key, value] : keys) {
        FUZZ_CHECK(key.starts_with("--"));
        if (const auto d = cli::parse_duration(value)) {
            FUZZ_CHECK(d->count() >= 0);
        }
        if (const auto cs = zkco::parse_connect_string(value)) {
            FUZZ_CHECK(!cs->servers.empty());
            FUZZ_CHECK(zkco::parse_connect_string(zkco::format_connect_string(*cs)).has_value());
        }
        (void)http::parse_listen_address(value);
    }
    return 0;
}
