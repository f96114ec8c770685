// SPDX-License-Identifier: MIT
// The config file (`zkd --config FILE`, docs/cli.md): cli::parse_config, then the
// value parsers its keys go through (durations, the ZooKeeper connect string, the HTTP
// listen address). Bad input is a usage_error, never a crash; a duration is never negative.
#include "cli/options.hpp"
#include "fuzz_common.hpp"
#include "http/api.hpp"
#include "protocol/syntax.hpp"
#include "zkco/config.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd;
    std::map<std::string, cli::config_entry> keys;
    try {
        keys = cli::parse_config(fuzz::as_text(data, size), "fuzz.conf");
    } catch (const cli::usage_error& e) {
        FUZZ_CHECK(std::string_view(e.what()).starts_with("fuzz.conf:"));
        return 0;
    }
    for (const auto& [key, entry] : keys) {
        FUZZ_CHECK(key.starts_with("--"));
        FUZZ_CHECK(entry.where.starts_with("fuzz.conf:"));
        const auto& value = entry.value;
        if (const auto d = protocol::parse_duration(value)) {
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
