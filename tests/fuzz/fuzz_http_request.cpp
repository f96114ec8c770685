// SPDX-License-Identifier: MIT
// A whole HTTP request as a client sends it, read the way http/connection.cpp reads one
// (Beast's request_parser with the server's default header and body limits), then taken
// apart by the API's pure parts: the target and its query, the route, a task id, the body
// of a submit. Nothing crashes or throws; every refusal's error body is JSON.
#include "fuzz_common.hpp"
#include "http/api.hpp"
#include "http/server.hpp"
#include "protocol/ids.hpp"

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace {

void check_error_body(const zkd::http::api_error& e) {
    FUZZ_CHECK(e.status >= 400 && e.status < 600);
    FUZZ_CHECK(!e.code.empty());
    boost::system::error_code ec;
    (void)boost::json::parse(boost::json::serialize(zkd::http::error_json(e.code, e.message)), ec);
    FUZZ_CHECK(!ec);  // the error body is JSON (UTF-8 included)
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace bhttp = boost::beast::http;
    using namespace zkd::http;
    const server_options defaults;
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(defaults.max_header_bytes));
    parser.body_limit(defaults.max_body_bytes);
    parser.eager(true);

    boost::system::error_code ec;
    const auto text = zkd::fuzz::as_text(data, size);
    std::size_t used = 0;
    while (!ec && !parser.is_done() && used < text.size()) {
        const auto n = parser.put(boost::asio::buffer(text.data() + used, text.size() - used), ec);
        if (n == 0 && ec == bhttp::error::need_more) {
            break;
        }
        used += n;
    }
    if (!parser.is_done()) {
        ec = {};
        parser.put_eof(ec);  // the client closed the connection here
    }
    if (ec || !parser.is_done()) {
        return 0;
    }
    auto req = parser.release();

    const auto t = parse_target(std::string_view(req.target().data(), req.target().size()));
    if (!t) {
        check_error_body(t.error());
        return 0;
    }
    FUZZ_CHECK(t->path.starts_with("/"));
    for (const char* key : {"wait", "bundle", "limit"}) {
        if (const auto q = query_int(*t, key, 0, 1'000'000); !q) {
            check_error_body(q.error());
        }
    }
    const auto r = match_route(t->path);
    FUZZ_CHECK(r.what == resource::none || !allowed_methods(r.what).empty());
    if (r.what == resource::task || r.what == resource::result) {
        if (const auto ref = zkd::protocol::parse_task_ref(r.task_id)) {
            FUZZ_CHECK(zkd::protocol::is_valid_task_id(ref->node));
        }
    }
    if (r.what == resource::tasks && req.method() == bhttp::verb::post) {
        if (const auto s = parse_submit(req.body()); !s) {
            check_error_body(s.error());
        }
    }
    return 0;
}
