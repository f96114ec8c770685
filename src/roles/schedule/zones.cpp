// SPDX-License-Identifier: MIT
#include "roles/schedule/zones.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

namespace zkd::roles {

namespace {

std::shared_ptr<const schedule::zone> load(std::string_view name) {
    if (!schedule::is_valid_zone_name(name)) {
        return nullptr;
    }
    static std::mutex mutex;
    static std::map<std::string, std::shared_ptr<const schedule::zone>, std::less<>> cache;
    const std::lock_guard lock(mutex);
    if (auto it = cache.find(name); it != cache.end()) {
        return it->second;
    }
    const char* dir = std::getenv("TZDIR");
    const std::string path =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo") + "/" +
        std::string(name);
    std::ifstream in(path, std::ios::binary);
    std::shared_ptr<const schedule::zone> z;
    if (in) {
        std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        auto parsed = schedule::parse_tzif(name, bytes);
        if (parsed) {
            z = std::make_shared<const schedule::zone>(std::move(*parsed));
        } else {
            spdlog::warn("time zone {}: {}: {}", name, path, parsed.error().message);
        }
    }
    if (z) {
        cache.emplace(std::string(name), z);
    }
    return z;
}

}  // namespace

schedule::zone_loader system_zones() {
    return load;
}

}  // namespace zkd::roles
