// SPDX-License-Identifier: MIT
// The zkd command line: flags, their environment variables and the config file.
#pragma once

#include "zkco/config.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::cli {

// Exit codes, for scripts (docs/cli.md lists them).
inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;         ///< the task did not succeed / the command failed
inline constexpr int exit_usage = 2;          ///< bad command line, config file or environment
inline constexpr int exit_unreachable = 3;    ///< ZooKeeper could not be reached in time
inline constexpr int exit_timeout = 4;        ///< gave up waiting (--timeout)
inline constexpr int exit_not_found = 5;      ///< no such task (or job)
inline constexpr int exit_queue_full = 6;     ///< the cluster's bound on pending tasks is reached
inline constexpr int exit_interrupted = 130;  ///< SIGINT/SIGTERM while waiting (128 + SIGINT)

/// A mistake in what the user gave us: printed with a pointer to --help, exit_usage.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// One option of a command. Settable ones can also come from the environment
/// (`--session-timeout` → `ZKD_SESSION_TIMEOUT`) and from the config file
/// (`session-timeout = 5s`); the command line wins over the environment, which wins over
/// the file.
struct option {
    std::string name;         ///< with the dashes: "--capacity"
    bool takes_value = true;  ///< false: a switch
    bool settable = true;     ///< also from the environment and the config file
    bool repeatable = false;  ///< may be given several times (values())
};

/// The options every command that talks to a cluster takes, followed by `own`.
std::vector<option> cluster_options(std::vector<option> own = {});

/// A config file's setting: its value and where it was set ("FILE:LINE").
struct config_entry {
    std::string value;
    std::string where;
};

/// A command's parsed arguments.
class args {
public:
    /// Parses argv[first..] against `known` (plus --help and --config, always). A switch
    /// given as `--flag=value` is refused; `--` ends the options. The config file is
    /// `--config FILE` or env ZKD_CONFIG; its keys that belong to other commands are ignored,
    /// keys no command knows are an error. Throws usage_error.
    static args parse(int argc, char** argv, int first, const std::vector<option>& known);

    /// True when the option was given anywhere (switches: set to a true value).
    [[nodiscard]] bool has(const std::string& name) const;
    /// Its value from the command line, the environment or the config file.
    [[nodiscard]] std::optional<std::string> value(const std::string& name) const;
    [[nodiscard]] std::string get(const std::string& name, std::string fallback) const;
    /// A whole number within [min, max]. Throws usage_error.
    [[nodiscard]] long number(const std::string& name, long fallback, long min, long max) const;
    /// A duration (protocol::parse_duration: 250ms, 30s, 4m30s, 2h; a bare number is
    /// milliseconds) within [min, max]. Throws usage_error.
    [[nodiscard]] std::chrono::milliseconds duration(
        const std::string& name,
        std::chrono::milliseconds fallback,
        std::chrono::milliseconds min,
        std::chrono::milliseconds max
    ) const;
    /// Where the option's value came from, for error messages: "--limit" (the command line,
    /// or not given), "ZKD_LIMIT" (the environment) or "FILE:LINE: limit" (the config file).
    [[nodiscard]] std::string source(const std::string& name) const;

    /// Every value of a repeatable option from the command line, in order.
    [[nodiscard]] std::vector<std::string> values(const std::string& name) const;

    /// The config file's `exec.*` keys (docs/exec.md), without "exec.", with their values
    /// and lines.
    [[nodiscard]] const std::map<std::string, config_entry>& exec_settings() const {
        return exec_settings_;
    }

    std::vector<std::string> positional;

private:
    struct setting {
        std::string value;
        std::string origin;  // see source()
    };
    std::map<std::string, std::vector<std::string>> repeated_;  // repeatable, command line
    std::map<std::string, config_entry> exec_settings_;         // config file `exec.*`
    std::map<std::string, std::string> given_;                  // command line
    std::map<std::string, setting> settable_;                   // environment, then config file
    std::map<std::string, bool> switch_;                        // which names are switches
};

/// Parses a config file's text: `key = value` lines, keys without the dashes, each one some
/// command's settable option or an `exec.*` key (docs/exec.md). A `#` at the start of a line
/// or after a space or tab starts a comment, except inside the quotes around a value (which
/// are dropped: `token = "a #b"`).
/// Returns them by "--key" (a repeated key keeps its last value). `path` names the file in
/// messages and in `where` ("path:line"). Pure (no I/O); throws usage_error.
std::map<std::string, config_entry> parse_config(std::string_view text, const std::string& path);

/// The `ZKD_*` environment variables that are no option of any command (nor another variable
/// zkd reads), each with the nearest known name when one is close: typos to warn about.
std::vector<std::pair<std::string, std::string>> unknown_environment(char** env);

/// The cluster a command talks to, from --zk, --namespace and the credentials.
struct cluster_target {
    std::string hosts;   ///< the ZooKeeper connect string as given (may carry a /path)
    std::string ns;      ///< the namespace
    std::string chroot;  ///< "/zkd/<ns>"
    std::optional<zkco::credentials> auth;
    std::chrono::milliseconds connect_timeout{10'000};

    /// A session config on the cluster's namespace.
    [[nodiscard]] zkco::config session_config(std::chrono::milliseconds session_timeout) const;
};

/// Validates --zk, --namespace, --user/--password/--password-file and --connect-timeout.
/// Throws usage_error.
cluster_target target_of(const args& a);

/// True for the host names of loopback: "localhost" and addresses in 127.0.0.0/8 or ::1
/// (IPv4-mapped too). Any other name is not, whatever it resolves to.
bool is_loopback_host(std::string_view host);

/// What `zkd run` warns of at start when `t` has no credentials and some ZooKeeper host of
/// `t.hosts` is not loopback: that every client of the ensemble can use the cluster, and how
/// to close it. Empty when there is nothing to warn of (credentials, or loopback only).
std::string open_cluster_warning(const cluster_target& t);

}  // namespace zkd::cli
