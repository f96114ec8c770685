// SPDX-License-Identifier: MIT
#include "cli/options.hpp"

#include "protocol/layout.hpp"
#include "protocol/syntax.hpp"
#include "zkco/config.hpp"
#include "zkco/types.hpp"

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace zkd::cli {

namespace {

/// Every settable option some command knows: a config file key outside this set is a typo.
const std::set<std::string>& every_settable() {
    static const std::set<std::string> all{
        "--zk",
        "--namespace",
        "--user",
        "--password",
        "--password-file",
        "--connect-timeout",
        "--capacity",
        "--threads",
        "--role",
        "--session-timeout",
        "--placement",
        "--host",
        "--log-level",
        "--log-format",
        "--grace",
        "--result-retention",
        "--max-pending",
        "--no-direct",
        "--suspect-after",
        "--http",
        "--http-token",
        "--http-token-file",
        "--http-tls-cert",
        "--http-tls-key",
        "--http-insecure",
        "--http-max-connections",
        "--enable-crash-task",
        "--exec-limits",
        "--priority",
        "--task-timeout",
        "--max-attempts",
        "--timeout",
        "--limit",
        "--partitions",
        "--partition-timeout",
        "--charset",
        "--min-length",
        "--max-length",
        "--wordlist"};
    return all;
}

/// Variables zkd reads that are no option: ZKD_CONFIG, the C client's log level, where the
/// exec supervisor program is (ZKD_SUPERVISE), and the test harness's (ZKD_TEST_*,
/// ZKD_REQUIRE_*), which tests pass down to zkd processes.
bool other_known_variable(const std::string& name) {
    return name == "ZKD_CONFIG" || name == "ZKD_ZK_CLIENT_LOG" || name == "ZKD_SUPERVISE" ||
           name.starts_with("ZKD_TEST_") || name.starts_with("ZKD_REQUIRE_");
}

std::string env_name(const std::string& option) {
    std::string e = "ZKD_";
    for (const char c : option.substr(2)) {
        e += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return e;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) {
        return {};
    }
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

/// What the config file sets (parse_config).
using config_value = config_entry;

std::map<std::string, config_value> read_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        throw usage_error("cannot read the config file '" + path + "'");
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse_config(text.str(), path);
}

/// Where `line`'s comment begins: at a `#` that begins the line or follows a space or tab,
/// outside the quotes around a value (`key = "a # b"  # comment`); its size if none.
std::size_t comment_start(std::string_view line) {
    std::size_t quote_open = std::string_view::npos;
    std::size_t quote_close = std::string_view::npos;
    if (const auto eq = line.find('='); eq != std::string_view::npos) {
        const auto v = line.find_first_not_of(" \t", eq + 1);
        if (v != std::string_view::npos && (line[v] == '"' || line[v] == '\'')) {
            quote_close = line.find(line[v], v + 1);
            quote_open = quote_close == std::string_view::npos ? quote_close : v;
        }
    }
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (i == quote_open) {
            i = quote_close;
        } else if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
            return i;
        }
    }
    return line.size();
}

/// A value without the quotes around it, if it has them.
std::string unquote(std::string value) {
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
        return value.substr(1, value.size() - 2);
    }
    return value;
}

/// " (did you mean 'KEY'?)" for the settable option nearest to `key` ("--key"), if one is.
std::string did_you_mean(const std::string& key) {
    const auto near = protocol::nearest(key, every_settable(), 3);
    return near.empty() ? std::string{} : " (did you mean '" + near.substr(2) + "'?)";
}

bool truthy(const std::string& v) {
    return v.empty() || v == "1" || v == "true" || v == "yes" || v == "on";
}

}  // namespace

std::vector<option> cluster_options(std::vector<option> own) {
    std::vector<option> all{{"--zk"},       {"--namespace"},     {"--user"},
                            {"--password"}, {"--password-file"}, {"--connect-timeout"}};
    all.insert(all.end(), own.begin(), own.end());
    return all;
}

args args::parse(int argc, char** argv, int first, const std::vector<option>& known) {
    args a;
    std::map<std::string, const option*> by_name;
    for (const auto& o : known) {
        by_name[o.name] = &o;
        a.switch_[o.name] = !o.takes_value;
    }
    bool options_done = false;
    std::optional<std::string> config = std::nullopt;
    for (int i = first; i < argc; ++i) {
        std::string s = argv[i];
        if (options_done || s.rfind("--", 0) != 0) {
            a.positional.push_back(std::move(s));
            continue;
        }
        if (s == "--") {
            options_done = true;
            continue;
        }
        std::optional<std::string> inline_value;
        if (const auto eq = s.find('='); eq != std::string::npos) {
            inline_value = s.substr(eq + 1);
            s.resize(eq);
        }
        if (s == "--help") {
            a.given_["--help"] = "";
            continue;
        }
        if (s == "--config") {
            if (!inline_value && i + 1 >= argc) {
                throw usage_error("--config needs a file");
            }
            config = inline_value ? *inline_value : argv[++i];
            continue;
        }
        const auto it = by_name.find(s);
        if (it == by_name.end()) {
            throw usage_error("unknown option " + s);
        }
        if (!it->second->takes_value) {
            if (inline_value) {
                throw usage_error(s + " takes no value");
            }
            a.given_[s] = "";
            continue;
        }
        if (it->second->repeatable) {
            if (!inline_value && i + 1 >= argc) {
                throw usage_error(s + " needs a value");
            }
            a.repeated_[s].push_back(inline_value ? *inline_value : argv[++i]);
            a.given_[s] = a.repeated_[s].back();
            continue;
        }
        if (inline_value) {
            a.given_[s] = *inline_value;
        } else if (i + 1 < argc) {
            a.given_[s] = argv[++i];
        } else {
            throw usage_error(s + " needs a value");
        }
    }
    if (a.given_.contains("--help")) {
        return a;  // nothing else matters
    }
    if (!config) {
        if (const char* env = std::getenv("ZKD_CONFIG")) {  // NOLINT(concurrency-mt-unsafe)
            config = env;
        }
    }
    std::map<std::string, config_value> from_file;
    if (config && !config->empty()) {
        from_file = read_config(*config);
    }
    for (auto f = from_file.begin(); f != from_file.end();) {
        if (f->first.rfind("--exec.", 0) == 0) {
            a.exec_settings_[f->first.substr(7)] = f->second;
            f = from_file.erase(f);
        } else {
            ++f;
        }
    }
    for (const auto& o : known) {
        if (!o.settable) {
            continue;
        }
        const auto var = env_name(o.name);
        if (const char* env = std::getenv(var.c_str())) {  // NOLINT(concurrency-mt-unsafe)
            a.settable_[o.name] = {env, var};
        } else if (auto f = from_file.find(o.name); f != from_file.end()) {
            a.settable_[o.name] = {f->second.value, f->second.where + ": " + o.name.substr(2)};
        }
    }
    return a;
}

std::vector<std::pair<std::string, std::string>> unknown_environment(char** env) {
    std::vector<std::string> variables;
    for (const auto& option : every_settable()) {
        variables.push_back(env_name(option));
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (; env != nullptr && *env != nullptr; ++env) {
        const std::string entry(*env);
        const std::string name = entry.substr(0, entry.find('='));
        if (!name.starts_with("ZKD_") || other_known_variable(name) ||
            std::ranges::find(variables, name) != variables.end()) {
            continue;
        }
        out.emplace_back(name, protocol::nearest(name, variables, 3));  // farther: no typo
    }
    return out;
}

bool args::has(const std::string& name) const {
    if (given_.contains(name)) {
        return true;
    }
    const auto it = settable_.find(name);
    if (it == settable_.end()) {
        return false;
    }
    const auto sw = switch_.find(name);
    return sw == switch_.end() || !sw->second || truthy(it->second.value);
}

std::vector<std::string> args::values(const std::string& name) const {
    const auto it = repeated_.find(name);
    return it == repeated_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> args::value(const std::string& name) const {
    if (auto it = given_.find(name); it != given_.end()) {
        return it->second;
    }
    if (auto it = settable_.find(name); it != settable_.end()) {
        return it->second.value;
    }
    return std::nullopt;
}

std::string args::source(const std::string& name) const {
    if (given_.contains(name)) {
        return name;
    }
    const auto it = settable_.find(name);
    return it == settable_.end() ? name : it->second.origin;
}

std::string args::get(const std::string& name, std::string fallback) const {
    auto v = value(name);
    return v ? *v : std::move(fallback);
}

long args::number(const std::string& name, long fallback, long min, long max) const {
    const auto v = value(name);
    if (!v) {
        return fallback;
    }
    try {
        std::size_t used = 0;
        const long n = std::stol(*v, &used);
        if (used == v->size() && n >= min && n <= max) {
            return n;
        }
    } catch (const std::exception&) {
    }
    throw usage_error(
        source(name) + " wants a whole number from " + std::to_string(min) + " to " +
        std::to_string(max) + ", not '" + *v + "'"
    );
}

std::map<std::string, config_entry> parse_config(std::string_view text, const std::string& path) {
    std::map<std::string, config_entry> out;
    int number = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto nl = std::min(text.find('\n', pos), text.size());
        std::string line = trim(std::string(text.substr(pos, nl - pos)));
        pos = nl + 1;
        ++number;
        const std::string where = path + ":" + std::to_string(number);
        line = trim(line.substr(0, comment_start(line)));
        if (line.empty()) {
            continue;
        }
        const auto eq = line.find('=');
        if (eq == std::string::npos) {
            throw usage_error(where + ": expected 'key = value'");
        }
        const std::string key = "--" + trim(line.substr(0, eq));
        if (!every_settable().contains(key) && !key.starts_with("--exec.")) {
            throw usage_error(where + ": unknown key '" + key.substr(2) + "'" + did_you_mean(key));
        }
        out[key] = {unquote(trim(line.substr(eq + 1))), where};
    }
    return out;
}

std::chrono::milliseconds args::duration(
    const std::string& name,
    std::chrono::milliseconds fallback,
    std::chrono::milliseconds min,
    std::chrono::milliseconds max
) const {
    const auto v = value(name);
    if (!v) {
        return fallback;
    }
    const auto d = protocol::parse_duration(*v);
    if (!d || *d < min || *d > max) {
        throw usage_error(
            source(name) + " wants a duration from " + std::to_string(min.count()) + "ms to " +
            std::to_string(max.count() / 1000) + "s (" + std::string(protocol::duration_forms) +
            "), not '" + *v + "'"
        );
    }
    return *d;
}

zkco::config cluster_target::session_config(std::chrono::milliseconds session_timeout) const {
    zkco::config cfg;
    cfg.connect_string = hosts + chroot;
    cfg.session_timeout = session_timeout;
    cfg.auth = auth;
    return cfg;
}

cluster_target target_of(const args& a) {
    cluster_target t;
    t.hosts = a.get("--zk", "127.0.0.1:2181");
    if (!zkco::parse_connect_string(t.hosts)) {
        throw usage_error(
            a.source("--zk") + " wants host:port[,host:port...][/path], not '" + t.hosts + "'"
        );
    }
    t.ns = a.get("--namespace", "default");
    if (t.ns.empty() || t.ns.find('/') != std::string::npos || t.ns == "." || t.ns == "..") {
        throw usage_error(
            a.source("--namespace") + " wants a name without '/', not '" + t.ns + "'"
        );
    }
    t.chroot = protocol::chroot_path(t.ns);
    t.connect_timeout = a.duration(
        "--connect-timeout", std::chrono::seconds(10), std::chrono::milliseconds(1),
        std::chrono::hours(1)
    );

    const auto user = a.get("--user", "");
    std::string password = a.get("--password", "");
    if (const auto file = a.value("--password-file")) {
        std::ifstream in(*file);
        if (!in) {
            throw usage_error("cannot read " + a.source("--password-file") + " '" + *file + "'");
        }
        std::getline(in, password);
    }
    if (user.empty()) {
        if (!password.empty()) {
            throw usage_error("a password needs --user (or ZKD_USER)");
        }
        return t;
    }
    if (user.find(':') != std::string::npos) {
        throw usage_error(a.source("--user") + " must not contain ':'");
    }
    if (password.empty()) {
        throw usage_error("--user needs a password (--password, --password-file or ZKD_PASSWORD)");
    }
    t.auth = zkco::credentials{user, password};
    return t;
}

bool is_loopback_host(std::string_view host) {
    std::string lower(host);
    std::ranges::transform(lower, lower.begin(), [](unsigned char c) {
        return static_cast<char>(std::tolower(c));
    });
    if (lower == "localhost") {
        return true;
    }
    boost::system::error_code ec;
    const auto addr = boost::asio::ip::make_address(lower, ec);
    if (ec) {
        return false;
    }
    if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
        return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, addr.to_v6())
            .is_loopback();
    }
    return addr.is_loopback();
}

std::string open_cluster_warning(const cluster_target& t) {
    if (t.auth) {
        return {};
    }
    const auto parts = zkco::parse_connect_string(t.hosts);
    if (!parts) {
        return {};
    }
    std::string beyond;
    for (const auto& s : parts->servers) {
        if (!is_loopback_host(s.host)) {
            beyond = s.host;
            break;
        }
    }
    if (beyond.empty()) {
        return {};
    }
    return "no --user: the cluster in " + t.chroot +
           " is open to every client of the ZooKeeper "
           "ensemble (" +
           beyond +
           " is not loopback): any of them can read every task and "
           "result, forge results, cancel tasks and pose as a worker or the master. To close "
           "it, start every zkd of the cluster, and give every client command, the same "
           "--user NAME with --password-file FILE (or ZKD_PASSWORD), in a namespace made with "
           "them (docs/deploying.md, \"Deploying on several machines\")";
}

}  // namespace zkd::cli
