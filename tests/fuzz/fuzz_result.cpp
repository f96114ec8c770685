// SPDX-License-Identifier: MIT
// A result node's data (docs/protocol.md §5, §5.1), as any worker may write it:
// protocol::decode_result. A result it accepts passes validate(), survives encode + decode
// unchanged, and every bundled task's result can be taken from it.
#include "fuzz_common.hpp"
#include "protocol/task.hpp"

namespace {

/// Equal, the values' doubles within a few ulp (see json_close).
bool same(const zkd::protocol::task_result& x, const zkd::protocol::task_result& y) {
    if (!zkd::fuzz::json_close(x.value, y.value) || x.bundle.size() != y.bundle.size()) {
        return false;
    }
    for (std::size_t i = 0; i < x.bundle.size(); ++i) {
        if (!same(x.bundle[i], y.bundle[i])) {
            return false;
        }
    }
    auto a = x;
    auto b = y;
    a.value = b.value = nullptr;
    a.bundle.clear();
    b.bundle.clear();
    return a == b;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto text = zkd::fuzz::as_text(data, size);
    (void)result_size_ok(text);

    const auto r = decode_result(text);
    if (!r) {
        FUZZ_CHECK(!r.error().message.empty());
        return 0;
    }
    FUZZ_CHECK(is_result_state(r->state));
    FUZZ_CHECK(validate(*r).has_value());
    for (const auto& entry : r->bundle) {
        FUZZ_CHECK(validate_bundled(entry).has_value());
    }
    const auto encoded = encode(*r);
    const auto again = decode_result(encoded);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(same(*again, *r));

    // Each bundled task's own result: there for every entry, refused past the last.
    const auto n = r->bundle.size();
    for (std::size_t i = 0; i <= n && i < 8; ++i) {
        const auto one = bundled_result(*r, i, "x");
        FUZZ_CHECK(one.has_value() == (n == 0 || i < n));
        if (one) {
            FUZZ_CHECK(one->task == "x");
            FUZZ_CHECK(is_result_state(one->state));
        }
    }
    return 0;
}
