// SPDX-License-Identifier: MIT
#include "http/api.hpp"

#include "handlers/registry.hpp"
#include "protocol/delay.hpp"
#include "protocol/task.hpp"
#include "protocol/text.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/throw_exception.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdexcept>

namespace json = boost::json;
namespace ip = boost::asio::ip;

namespace zkd::http {

namespace {

api_error bad(std::string code, std::string message) {
    return api_error{400, std::move(code), std::move(message)};
}

std::optional<std::int64_t> parse_int(std::string_view s) {
    std::int64_t v = 0;
    const auto* end = s.data() + s.size();
    const auto [p, ec] = std::from_chars(s.data(), end, v);
    if (s.empty() || ec != std::errc{} || p != end) {
        return std::nullopt;
    }
    return v;
}

/// `s` with each byte that is not part of valid UTF-8 (strict: no overlong forms, no
/// surrogates, nothing above U+10FFFF) replaced by U+FFFD, so that a JSON body quoting what a
/// client sent (a query value, a path, a type cut at 140 bytes) is still UTF-8, hence JSON.
std::string to_utf8(std::string_view s) {
    return protocol::printable_utf8(s, "\xEF\xBF\xBD");  // U+FFFD
}

/// The fields of a task object that say when it may start and how it is retried
/// (docs/protocol.md §4.3), as submit_options; `now_ms` turns `delay_ms` into a due time.
struct timing {
    std::optional<std::int64_t> delay_ms;
    std::optional<std::int64_t> at_ms;
    std::optional<int> retries;
    std::optional<std::int64_t> backoff_ms;
    std::optional<std::int64_t> backoff_max_ms;
    friend bool operator==(const timing&, const timing&) = default;
};

/// One task object of the body; `where` names it in messages ("task 3: "). `when`: its
/// timing fields; `allow_unserved`: set to the task's "allow_unserved".
api_result<protocol::task_spec> parse_task(
    const json::value& v, const std::string& where, timing& when, bool& allow_unserved
) {
    constexpr std::int64_t int_min = std::numeric_limits<int>::min();
    constexpr std::int64_t int_max = std::numeric_limits<int>::max();
    if (!v.is_object()) {
        return bad("invalid_task", where + "a task is a JSON object");
    }
    const auto& o = v.get_object();
    protocol::task_spec t;
    bool has_type = false;
    for (const auto& [key, value] : o) {
        const auto number = protocol::as_int64(value);
        if (key == "type") {
            if (!value.is_string()) {
                return bad("invalid_task", where + "\"type\" must be a string");
            }
            t.type = std::string(value.get_string());
            has_type = true;
        } else if (key == "args") {
            t.args = value;
        } else if (key == "priority") {
            if (!number || *number < int_min || *number > int_max) {
                return bad(
                    "invalid_task", where + "\"priority\" must be a whole number from 0 to 9"
                );
            }
            t.priority = static_cast<int>(*number);
        } else if (key == "timeout_ms") {
            if (!number) {
                return bad("invalid_task", where + "\"timeout_ms\" must be a whole number >= 0");
            }
            t.timeout = std::chrono::milliseconds(*number);
        } else if (key == "max_attempts") {
            if (!number || *number < int_min || *number > int_max) {
                return bad(
                    "invalid_task", where + "\"max_attempts\" must be a whole number from 1 to " +
                                        std::to_string(protocol::max_attempts_limit)
                );
            }
            t.max_attempts = static_cast<int>(*number);
        } else if (key == "allow_unserved") {
            if (!value.is_bool()) {
                return bad("invalid_task", where + "\"allow_unserved\" must be true or false");
            }
            allow_unserved = value.get_bool();
        } else if (key == "delay_ms") {
            if (!number || *number < 0 || *number > protocol::max_due_ms) {
                return bad("invalid_task", where + "\"delay_ms\" must be a whole number >= 0");
            }
            when.delay_ms = *number;
        } else if (key == "at") {
            auto at = value.is_string()
                          ? protocol::parse_time(std::string(value.get_string()))
                          : (number ? protocol::parse_time(std::to_string(*number)) : std::nullopt);
            if (!at) {
                return bad(
                    "invalid_task", where +
                                        "\"at\" must be an RFC 3339 time "
                                        "(\"2026-11-27T08:30:00Z\") or ms since the epoch"
                );
            }
            when.at_ms = *at;
        } else if (key == "retries") {
            if (!number || *number < 0 || *number > protocol::max_retries_limit) {
                return bad(
                    "invalid_task", where + "\"retries\" must be a whole number from 0 to " +
                                        std::to_string(protocol::max_retries_limit)
                );
            }
            when.retries = static_cast<int>(*number);
        } else if (key == "backoff_ms" || key == "backoff_max_ms") {
            if (!number || *number < 1 || *number > 24L * 3600 * 1000) {
                return bad(
                    "invalid_task",
                    where + "\"" + std::string(key) + "\" must be a whole number from 1 to 86400000"
                );
            }
            (key == "backoff_ms" ? when.backoff_ms : when.backoff_max_ms) = *number;
        } else {
            return bad(
                "invalid_task",
                where + "unknown field \"" + std::string(key) +
                    "\" (known: type, args, priority, timeout_ms, max_attempts, "
                    "allow_unserved, delay_ms, at, retries, backoff_ms, backoff_max_ms)"
            );
        }
    }
    if (!has_type) {
        return bad("invalid_task", where + "\"type\" is required");
    }
    if (when.delay_ms && when.at_ms) {
        return bad("invalid_task", where + R"("delay_ms" and "at" both say when; give one)");
    }
    if (when.backoff_max_ms && !when.backoff_ms) {
        return bad("invalid_task", where + R"("backoff_max_ms" wants "backoff_ms" too)");
    }
    if (when.backoff_ms && when.backoff_max_ms && *when.backoff_max_ms < *when.backoff_ms) {
        return bad("invalid_task", where + R"("backoff_max_ms" is below "backoff_ms")");
    }
    // The rules (the type name, ranges, args nesting, numbers JSON can hold): the codec's, the
    // same the client, the master and the worker apply.
    if (auto ok = protocol::validate(t); !ok) {
        return bad("invalid_task", where + ok.error().message);
    }
    return t;
}

bool iequal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

/// Whether a Host header names this loopback server: a loopback name or address, with the
/// bound port or none.
bool loopback_host(std::string_view host, std::uint16_t port) {
    std::string_view name = host;
    std::string_view port_text;
    if (!host.empty() && host.front() == '[') {
        const auto close = host.find(']');
        if (close == std::string_view::npos) {
            return false;
        }
        name = host.substr(1, close - 1);
        const auto rest = host.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') {
                return false;
            }
            port_text = rest.substr(1);
        }
    } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
        name = host.substr(0, colon);
        port_text = host.substr(colon + 1);
    }
    if (!port_text.empty() || host.ends_with(":")) {
        const auto n = parse_int(port_text);
        if (!n || *n != port) {
            return false;
        }
    }
    if (iequal(name, "localhost")) {
        return true;
    }
    boost::system::error_code ec;
    const auto a = ip::make_address(std::string(name), ec);
    return !ec && a.is_loopback();
}

std::array<unsigned char, 32> sha256(std::string_view s) {
    std::array<unsigned char, 32> out{};
    unsigned int n = 0;
    if (EVP_Digest(s.data(), s.size(), out.data(), &n, EVP_sha256(), nullptr) != 1) {
        out.fill(0xff);  // cannot happen; compares unequal to any real digest but its own
    }
    return out;
}

/// Equal in time independent of where they differ: compares SHA-256 digests.
bool same_secret(std::string_view given, std::string_view secret) {
    const auto a = sha256(given);
    const auto b = sha256(secret);
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::optional<api_error> check_access(const access_policy& p, const access_request& req) {
    if (p.loopback && req.host && !loopback_host(*req.host, p.port)) {
        return api_error{
            403, "bad_host",
            "this server is bound to loopback and answers only to localhost, 127.0.0.1 or "
            "[::1] as Host (DNS rebinding protection)"};
    }
    if (req.origin) {
        const std::string own =
            std::string(p.tls ? "https://" : "http://") + std::string(req.host.value_or(""));
        if (!req.host || !iequal(*req.origin, own)) {
            return api_error{
                403, "cross_origin",
                "requests from web pages of another origin are refused (Origin: " +
                    std::string(req.origin->substr(0, 100)) + ")"};
        }
    }
    if (req.fetch_site &&
        (iequal(*req.fetch_site, "cross-site") || iequal(*req.fetch_site, "same-site"))) {
        return api_error{
            403, "cross_origin", "requests from web pages of another origin are refused"};
    }
    if (!token_matches(p, req)) {
        return api_error{
            401, "unauthorized",
            req.authorization ? "the bearer token is wrong"
                              : "this API needs a token: Authorization: Bearer <token>"};
    }
    return std::nullopt;
}

bool token_matches(const access_policy& p, const access_request& req) {
    if (p.token.empty()) {
        return true;
    }
    constexpr std::string_view scheme = "bearer ";
    const auto auth = req.authorization.value_or("");
    const bool bearer =
        auth.size() > scheme.size() && iequal(auth.substr(0, scheme.size()), scheme);
    std::string_view given = bearer ? auth.substr(scheme.size()) : std::string_view{};
    while (!given.empty() && given.front() == ' ') {
        given.remove_prefix(1);
    }
    // Always compare, whatever was sent: the time says nothing about the token.
    return same_secret(given, p.token) && bearer;
}

bool is_json_media_type(std::string_view content_type) {
    auto type = content_type.substr(0, content_type.find(';'));
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) {
        type.remove_suffix(1);
    }
    while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) {
        type.remove_prefix(1);
    }
    return iequal(type, "application/json");
}

std::string exposure_problem(const ip::tcp::endpoint& ep, bool token, bool tls, bool digest_auth) {
    if (ep.address().is_loopback()) {
        if (digest_auth && !token) {
            return "the cluster is protected by ZooKeeper credentials (--user), but without a "
                   "token anyone on this machine could use the HTTP API to submit, read and "
                   "cancel tasks: set --http-token-file (or ZKD_HTTP_TOKEN_FILE)";
        }
        return {};
    }
    if (!token) {
        return "anyone who can reach this address could submit, read and cancel tasks: set "
               "--http-token-file (or ZKD_HTTP_TOKEN_FILE), and TLS (--http-tls-cert, "
               "--http-tls-key)";
    }
    if (!tls) {
        return "the token and every result would cross the network in clear text: set "
               "--http-tls-cert and --http-tls-key";
    }
    return {};
}

boost::system::result<void, std::string> check_token(std::string_view token) {
    if (token.empty()) {
        return std::string("the token is empty");
    }
    if (token.size() > 4096) {
        return std::string("the token is over 4096 characters");
    }
    std::size_t i = 0;
    const auto token_char = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' ||
               c == '_' || c == '~' || c == '+' || c == '/';
    };
    while (i < token.size() && token_char(token[i])) {
        ++i;
    }
    const bool body = i > 0;
    while (i < token.size() && token[i] == '=') {
        ++i;
    }
    if (!body || i != token.size()) {
        return std::string(
            "the token may hold only letters, digits and -._~+/ (then '=' padding), no spaces"
        );
    }
    return {};
}

boost::system::result<ip::tcp::endpoint> parse_listen_address(std::string_view s) {
    const auto invalid = std::make_error_code(std::errc::invalid_argument);
    const auto colon = s.rfind(':');
    if (colon == std::string_view::npos) {
        return invalid;
    }
    const auto port = parse_int(s.substr(colon + 1));
    if (!port || *port < 0 || *port > 65535) {
        return invalid;
    }
    std::string_view host = s.substr(0, colon);
    ip::address address = ip::address_v4::loopback();
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        boost::system::error_code ec;
        const auto v6 = ip::make_address_v6(host.substr(1, host.size() - 2), ec);
        if (ec) {
            return invalid;
        }
        address = v6;
    } else if (!host.empty() && host != "localhost") {
        boost::system::error_code ec;
        const auto v4 = ip::make_address_v4(host, ec);
        if (ec) {
            return invalid;
        }
        address = v4;
    }
    return ip::tcp::endpoint(address, static_cast<std::uint16_t>(*port));
}

void throw_exception_from_error(const api_error& e, const boost::source_location& loc) {
    boost::throw_exception(std::invalid_argument(e.message), loc);
}

json::value error_json(std::string_view code, std::string_view message) {
    return json::object{
        {"error", json::object{{"code", to_utf8(code)}, {"message", to_utf8(message)}}}};
}

api_result<target> parse_target(std::string_view t) {
    target out;
    const auto q = t.find('?');
    out.path = std::string(t.substr(0, q));
    if (out.path.empty() || out.path.front() != '/') {
        return bad("bad_target", "the request target must be a path starting with '/'");
    }
    if (q == std::string_view::npos) {
        return out;
    }
    std::string_view rest = t.substr(q + 1);
    while (!rest.empty()) {
        const auto amp = rest.find('&');
        const auto part = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
        if (part.empty()) {
            continue;
        }
        const auto eq = part.find('=');
        auto key = std::string(part.substr(0, eq));
        auto value =
            eq == std::string_view::npos ? std::string() : std::string(part.substr(eq + 1));
        out.query.insert_or_assign(std::move(key), std::move(value));
    }
    return out;
}

api_result<std::optional<std::int64_t>> query_int(
    const target& t, std::string_view key, std::int64_t min, std::int64_t max
) {
    const auto it = t.query.find(key);
    if (it == t.query.end()) {
        return std::optional<std::int64_t>();
    }
    const auto v = parse_int(it->second);
    if (!v || *v < min || *v > max) {
        return bad(
            "bad_query", "query parameter " + std::string(key) + " wants a whole number from " +
                             std::to_string(min) + " to " + std::to_string(max) + ", not '" +
                             it->second.substr(0, 40) + "'"
        );
    }
    return std::optional<std::int64_t>(*v);
}

route match_route(std::string_view path) {
    if (path == "/v1/tasks") {
        return {resource::tasks, {}};
    }
    if (path == "/v1/cluster") {
        return {resource::cluster, {}};
    }
    if (path == "/v1/workflows") {
        return {resource::workflows, {}};
    }
    if (constexpr std::string_view under = "/v1/workflows/"; path.starts_with(under)) {
        const auto id = path.substr(under.size());
        if (id.find('/') == std::string_view::npos) {
            return {resource::workflow, std::string(id)};
        }
        return {};
    }
    if (path == "/v1/schedules") {
        return {resource::schedules, {}};
    }
    if (constexpr std::string_view under = "/v1/schedules/"; path.starts_with(under)) {
        const auto rest = path.substr(under.size());
        const auto slash = rest.find('/');
        if (slash == std::string_view::npos) {
            return {resource::schedule, std::string(rest)};
        }
        const auto action = rest.substr(slash + 1);
        if (action == "pause") {
            return {resource::schedule_pause, std::string(rest.substr(0, slash))};
        }
        if (action == "resume") {
            return {resource::schedule_resume, std::string(rest.substr(0, slash))};
        }
        return {};
    }
    if (path == "/metrics") {
        return {resource::metrics, {}};
    }
    if (path == "/v1/status") {
        return {resource::status, {}};
    }
    if (path == "/" || path.starts_with("/ui/")) {
        return {resource::page, {}};
    }
    constexpr std::string_view prefix = "/v1/tasks/";
    constexpr std::string_view result_suffix = "/result";
    if (path.starts_with(prefix)) {
        auto id = path.substr(prefix.size());
        auto what = resource::task;
        if (id.ends_with(result_suffix)) {
            id.remove_suffix(result_suffix.size());
            what = resource::result;
        }
        if (id.find('/') == std::string_view::npos) {
            return {what, std::string(id)};
        }
    }
    return {};
}

bool is_public(resource r) {
    return r == resource::page;
}

std::string_view allowed_methods(resource r) {
    switch (r) {
    case resource::tasks:
    case resource::workflows:
    case resource::schedules:
        return "GET, POST";
    case resource::task:
    case resource::result:
    case resource::workflow:
    case resource::schedule:
        return "GET, DELETE";
    case resource::cluster:
    case resource::metrics:
    case resource::status:
    case resource::page:
        return "GET, HEAD";
    case resource::schedule_pause:
    case resource::schedule_resume:
        return "POST";
    case resource::none:
        break;
    }
    return "";
}

api_result<submit_request> parse_submit(std::string_view body) {
    boost::system::error_code ec;
    const auto doc = protocol::parse_json(body, ec, 1);  // + the array around several tasks
    if (ec) {
        return bad("bad_json", "the body is not JSON: " + ec.message());
    }
    submit_request out;
    const auto add = [&out](protocol::task_spec t, bool allow_unserved) {
        if (!allow_unserved &&
            std::find(out.check_served.begin(), out.check_served.end(), t.type) ==
                out.check_served.end()) {
            out.check_served.push_back(t.type);
        }
        out.tasks.push_back(std::move(t));
    };
    std::optional<timing> shared;
    // One submit call carries one timing: the tasks of an array must agree on it.
    auto take = [&](const timing& w, const std::string& where) -> api_result<void> {
        if (shared && !(*shared == w)) {
            return bad(
                "invalid_task", where +
                                    "the tasks of one array share delay_ms, at, retries "
                                    "and backoff: submit them apart"
            );
        }
        shared = w;
        return {};
    };
    if (doc.is_array()) {
        const auto& items = doc.get_array();
        if (items.empty()) {
            return bad("invalid_task", "an empty array submits nothing");
        }
        out.many = true;
        for (std::size_t i = 0; i < items.size(); ++i) {
            const auto where = "task " + std::to_string(i) + ": ";
            timing w;
            bool allow_unserved = false;
            auto t = parse_task(items[i], where, w, allow_unserved);
            if (!t) {
                return t.error();
            }
            if (auto ok = take(w, where); !ok) {
                return ok.error();
            }
            add(std::move(*t), allow_unserved);
        }
    } else {
        timing w;
        bool allow_unserved = false;
        auto t = parse_task(doc, {}, w, allow_unserved);
        if (!t) {
            return t.error();
        }
        (void)take(w, {});
        add(std::move(*t), allow_unserved);
    }
    const auto& w = *shared;
    if (w.delay_ms) {
        out.how.due_ms = protocol::now_ms() + *w.delay_ms;
    } else if (w.at_ms) {
        out.how.due_ms = *w.at_ms;
    }
    out.how.retries = w.retries;
    if (w.backoff_ms) {
        protocol::backoff_policy p;
        p.base = std::chrono::milliseconds(*w.backoff_ms);
        p.max = std::chrono::milliseconds(
            w.backoff_max_ms.value_or(std::min<std::int64_t>(*w.backoff_ms * 60, 24L * 3600 * 1000))
        );
        out.how.backoff = p;
    }
    return out;
}

}  // namespace zkd::http
