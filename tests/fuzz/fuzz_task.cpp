// SPDX-License-Identifier: MIT
// A task node's data (docs/protocol.md §4), as any client may write it: protocol::decode_task
// and the JSON reader under every codec (protocol::parse_json). A task it accepts passes
// validate() and survives encode + decode unchanged.
#include "fuzz_common.hpp"
#include "protocol/task.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto text = zkd::fuzz::as_text(data, size);
    boost::system::error_code ec;
    (void)parse_json(text, ec);
    (void)parse_json(text, ec, 1);
    (void)task_size_ok(text);

    const auto t = decode_task(text);
    if (!t) {
        FUZZ_CHECK(!t.error().message.empty());
        return 0;
    }
    FUZZ_CHECK(validate(*t).has_value());
    const auto encoded = encode(*t);
    const auto again = decode_task(encoded);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(zkd::fuzz::json_close(again->args, t->args));
    FUZZ_CHECK(zkd::fuzz::json_close(again->bundle, t->bundle));
    auto a = *again;
    auto b = *t;
    a.args = b.args = nullptr;
    a.bundle.clear();
    b.bundle.clear();
    FUZZ_CHECK(a == b);
    return 0;
}
