// SPDX-License-Identifier: MIT
// A /workers/<member> node's data (docs/protocol.md §2), as any member may write it:
// protocol::decode_worker. What it accepts has a capacity >= 0, threads >= 1 when said (the
// placer's bound, §7), sorted unique valid types, and survives encode + decode unchanged.
#include "fuzz_common.hpp"
#include "protocol/task.hpp"

#include <algorithm>

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto w = decode_worker(zkd::fuzz::as_text(data, size));
    if (!w) {
        FUZZ_CHECK(!w.error().message.empty());
        return 0;
    }
    FUZZ_CHECK(!w->id.empty());
    FUZZ_CHECK(w->capacity.has_value() && *w->capacity >= 0);
    FUZZ_CHECK(!w->threads || *w->threads >= 1);
    FUZZ_CHECK(std::is_sorted(w->types.begin(), w->types.end()));
    FUZZ_CHECK(std::adjacent_find(w->types.begin(), w->types.end()) == w->types.end());
    FUZZ_CHECK(std::all_of(w->types.begin(), w->types.end(), is_valid_task_type));
    const auto again = decode_worker(encode(*w));
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(*again == *w);
    return 0;
}
