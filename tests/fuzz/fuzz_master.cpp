// SPDX-License-Identifier: MIT
// The /master node and /election children (docs/protocol.md §2, §7), as any member may write
// them: protocol::decode_master and decode_member. What they accept survives encode + decode.
#include "fuzz_common.hpp"
#include "protocol/task.hpp"

namespace {

/// Equal, the throughput within a few ulp (see json_close).
bool same(zkd::protocol::member_info a, zkd::protocol::member_info b) {
    if (a.throughput.has_value() != b.throughput.has_value() ||
        (a.throughput && !zkd::fuzz::json_close(*a.throughput, *b.throughput))) {
        return false;
    }
    a.throughput = b.throughput = std::nullopt;
    return a == b;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto text = zkd::fuzz::as_text(data, size);
    if (const auto m = decode_member(text)) {
        FUZZ_CHECK(!m->id.empty());
        const auto again = decode_member(encode(*m));
        FUZZ_CHECK(again.has_value());
        FUZZ_CHECK(same(*again, *m));
    }
    const auto m = decode_master(text);
    if (!m) {
        FUZZ_CHECK(!m.error().message.empty());
        return 0;
    }
    FUZZ_CHECK(m->epoch.has_value() && *m->epoch >= 1);
    const auto again = decode_master(encode(*m));
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(same(*again, *m));
    return 0;
}
