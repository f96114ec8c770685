// SPDX-License-Identifier: MIT
// /epoch's data (docs/protocol.md §2), as any member may write it: protocol::decode_epoch.
// What it accepts survives encode + decode.
#include "fuzz_common.hpp"
#include "protocol/task.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto e = decode_epoch(zkd::fuzz::as_text(data, size));
    if (!e) {
        FUZZ_CHECK(!e.error().message.empty());
        return 0;
    }
    const auto again = decode_epoch(encode(*e));
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(*again == *e);
    return 0;
}
