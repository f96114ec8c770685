// SPDX-License-Identifier: MIT
// /meta and /cancel/<tid> (docs/protocol.md §2), as any member may write them:
// protocol::decode_meta (shard counts within 1..max_shards) and decode_cancel. What they
// accept survives encode + decode.
#include "fuzz_common.hpp"
#include "protocol/task.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto text = zkd::fuzz::as_text(data, size);
    if (const auto m = decode_meta(text)) {
        FUZZ_CHECK(m->pending_shards >= 1 && m->pending_shards <= max_shards);
        FUZZ_CHECK(m->result_shards >= 1 && m->result_shards <= max_shards);
        const auto again = decode_meta(encode(*m));
        FUZZ_CHECK(again.has_value());
        FUZZ_CHECK(*again == *m);
    } else {
        FUZZ_CHECK(!m.error().message.empty());
    }
    if (const auto c = decode_cancel(text)) {
        const auto again = decode_cancel(encode(*c));
        FUZZ_CHECK(again.has_value());
        FUZZ_CHECK(*again == *c);
    }
    return 0;
}
