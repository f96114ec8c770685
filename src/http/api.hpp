// SPDX-License-Identifier: MIT
// The HTTP API's pure parts (no I/O): the listen address, request targets and routes, the
// body of POST /v1/tasks, and the JSON of an error. The server puts them on the wire.
#pragma once

#include "roles/client/task_client.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::http {

/// Parses a listen address: "host:port" (an IPv4 literal, or "localhost" for 127.0.0.1),
/// "[v6]:port" (an IPv6 literal), or ":port" (loopback, 127.0.0.1). The port is 0 to 65535
/// (0: any free port). Host names other than localhost are refused (nothing is resolved).
/// Error: std::errc::invalid_argument.
boost::system::result<boost::asio::ip::tcp::endpoint> parse_listen_address(std::string_view s);

/// Why a request cannot be served: the HTTP status and the error's code and message.
struct api_error {
    unsigned status = 400;
    std::string code;     ///< machine-readable: "bad_json", "invalid_task", ...
    std::string message;  ///< for people
};

template <class T>
using api_result = boost::system::result<T, api_error>;

/// Found by ADL from api_result::value(): throws std::invalid_argument(message).
[[noreturn]] void throw_exception_from_error(const api_error& e, const boost::source_location& loc);

/// The body of every error response: `{"error":{"code":"...","message":"..."}}`. Bytes of
/// either that are not valid UTF-8 (a message quoting a client's bytes) become U+FFFD.
boost::json::value error_json(std::string_view code, std::string_view message);

/// A request target, split: the path and its query parameters (`a=1&b=2`; a key without
/// `=` has an empty value; a repeated key keeps its last value; nothing is percent-decoded).
struct target {
    std::string path;
    std::map<std::string, std::string, std::less<>> query;
};

/// Splits "/path?query". Error 400 `bad_target` unless the path starts with '/'.
api_result<target> parse_target(std::string_view t);

/// An integer query parameter within [min, max]; nullopt when absent. Error 400 `bad_query`
/// for anything else (empty, not a number, out of range).
api_result<std::optional<std::int64_t>> query_int(
    const target& t, std::string_view key, std::int64_t min, std::int64_t max
);

/// The API's resources.
enum class resource {
    tasks,      ///< /v1/tasks: GET (list), POST (submit)
    task,       ///< /v1/tasks/{id}: GET (state and result), DELETE (cancel)
    result,     ///< /v1/tasks/{id}/result: GET (wait for it), DELETE (wait for it and consume it)
    workflows,  ///< /v1/workflows: GET (list), POST (submit a spec)
    workflow,   ///< /v1/workflows/{id}: GET (status, ?wait for its end), DELETE (cancel)
    cluster,    ///< /v1/cluster: GET
    metrics,    ///< /metrics: GET
    status,     ///< /v1/status: GET (the status page's data)
    page,       ///< / and /ui/...: GET (the status page's static files; no token needed)
    schedules,  ///< /v1/schedules: GET (list), POST (add)
    schedule,   ///< /v1/schedules/{name}: GET (show), DELETE (remove)
    schedule_pause,   ///< /v1/schedules/{name}/pause: POST
    schedule_resume,  ///< /v1/schedules/{name}/resume: POST
    none,             ///< anything else: 404
};

/// A path matched to a resource.
struct route {
    resource what = resource::none;
    /// task, result, workflow: the {id} segment; schedule*: the {name} segment; as is (may
    /// be malformed).
    std::string task_id;
};

/// Matches a path (without query) to a resource. "/v1/tasks/{id}", "/v1/tasks/{id}/result",
/// "/v1/workflows/{id}" and "/v1/schedules/{name}" (also with "/pause" or "/resume") take any
/// single segment, an empty one included ("/v1/tasks/"); other paths below /v1/tasks/,
/// /v1/workflows/ and /v1/schedules/ are resource::none.
route match_route(std::string_view path);

/// Whether a resource is served without the bearer token: only the status page's static
/// files (resource::page), which hold no data (the page's own requests carry the token). The
/// Host and Origin checks apply to every resource.
bool is_public(resource r);

/// The Allow header of a resource: "GET, POST", "GET, DELETE", "GET, HEAD" or "POST" ("" for
/// none).
std::string_view allowed_methods(resource r);

/// Who may use the API (docs/http.md, threat model).
struct access_policy {
    /// When not empty, every request needs `Authorization: Bearer <token>` (else 401).
    std::string token;
    /// Bound to a loopback address: Host must name loopback (localhost, 127.x.y.z, [::1]),
    /// with the bound port or none (else 403 bad_host: DNS rebinding).
    bool loopback = true;
    std::uint16_t port = 0;  ///< the bound port
    bool tls = false;        ///< served over TLS: same-origin Origins are https://
};

/// The headers access checks look at; nullopt: absent.
struct access_request {
    std::optional<std::string_view> host;
    std::optional<std::string_view> origin;
    std::optional<std::string_view> fetch_site;  ///< Sec-Fetch-Site
    std::optional<std::string_view> authorization;
};

/// Whether `req` may be served under `p`: nothing, or the error to answer. In order: 403
/// `bad_host` (a Host a loopback bind does not answer to), 403 `cross_origin` (an Origin that
/// is not this server's own, or Sec-Fetch-Site cross-site or same-site: a web page elsewhere),
/// 401 `unauthorized` (no or a wrong bearer token; compared in constant time).
std::optional<api_error> check_access(const access_policy& p, const access_request& req);
/// True when `req` carries the policy's bearer token (or the policy wants none): the token
/// part of check_access alone.
bool token_matches(const access_policy& p, const access_request& req);

/// Whether a Content-Type is JSON: `application/json`, any case, parameters allowed.
bool is_json_media_type(std::string_view content_type);

/// Why serving the API on `ep` would expose it (a non-loopback address without a token, or
/// without TLS), for people; "" when it would not. `digest_auth`: the cluster is protected by
/// ZooKeeper credentials, so even a loopback bind needs a token.
std::string exposure_problem(
    const boost::asio::ip::tcp::endpoint& ep, bool token, bool tls, bool digest_auth
);

/// Checks a bearer token read from a file or the environment: 1 to 4096 characters of
/// RFC 6750's token68 ([A-Za-z0-9-._~+/] then '='s). Error: what is wrong, for people.
boost::system::result<void, std::string> check_token(std::string_view token);

/// What POST /v1/tasks asks for.
struct submit_request {
    std::vector<protocol::task_spec> tasks;
    bool many = false;  ///< the body was an array: the answer lists ids
    /// The tasks' delay and retries (`delay_ms` or `at`, `retries`, `backoff_ms`,
    /// `backoff_max_ms`; docs/http.md): the same for every task of an array.
    roles::submit_options how;
    /// The types some worker must serve, else the submit is refused (each once, in order of
    /// first use): those of the tasks without `"allow_unserved": true`.
    std::vector<std::string> check_served;
};

/// Parses POST /v1/tasks's body: one task object or a non-empty array of them. A task object
/// has a `type` (string, required) and optionally `args` (any JSON), `priority` (0-9,
/// default 5), `timeout_ms` (>= 0, default 0: none), `max_attempts` (>= 1, default 3) and
/// `allow_unserved` (a boolean, default false: see check_served); other fields are refused. Numbers
/// must be whole (3.0 is fine). Errors, all 400: `bad_json` (not JSON, or nested deeper than
/// protocol::max_json_depth), `invalid_task` (the rules above, or a type that is not a valid task
/// type name).
api_result<submit_request> parse_submit(std::string_view body);

}  // namespace zkd::http
