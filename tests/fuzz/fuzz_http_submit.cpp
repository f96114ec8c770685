// SPDX-License-Identifier: MIT
// The body of POST /v1/tasks (docs/http.md): http::parse_submit. What it accepts makes
// tasks a worker will take (validate()); what it refuses is a 400 whose error body is JSON.
#include "fuzz_common.hpp"
#include "http/api.hpp"
#include "protocol/task.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstddef>

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd;
    const auto r = http::parse_submit(fuzz::as_text(data, size));
    if (!r) {
        FUZZ_CHECK(r.error().status == 400);
        boost::system::error_code ec;
        (void)boost::json::parse(
            boost::json::serialize(http::error_json(r.error().code, r.error().message)), ec
        );
        FUZZ_CHECK(!ec);  // the error body is JSON (UTF-8 included)
        return 0;
    }
    FUZZ_CHECK(!r->tasks.empty());
    FUZZ_CHECK(r->many || r->tasks.size() == 1);
    // The types to check for a worker: each once, each the type of one of the tasks.
    FUZZ_CHECK(r->check_served.size() <= r->tasks.size());
    for (std::size_t i = 0; i < r->check_served.size(); ++i) {
        const auto& type = r->check_served[i];
        FUZZ_CHECK(std::any_of(r->tasks.begin(), r->tasks.end(), [&](const auto& t) {
            return t.type == type;
        }));
        FUZZ_CHECK(
            std::find(
                r->check_served.begin() + static_cast<std::ptrdiff_t>(i) + 1, r->check_served.end(),
                type
            ) == r->check_served.end()
        );
    }
    for (const auto& spec : r->tasks) {
        FUZZ_CHECK(protocol::validate(spec).has_value());
        const auto back = protocol::decode_task_node(protocol::encode(spec));
        FUZZ_CHECK(back.has_value());
    }
    return 0;
}
