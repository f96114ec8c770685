// SPDX-License-Identifier: MIT
// Bundles (docs/protocol.md §3, §4.1, §5.1): an id a client holds ("<bundle id>.<k>", first
// line of the input) with the node data it reads for it (the rest): the bundle's task or its
// result. The id names its node and index consistently with bundle_id/bundled_task_id, a
// bundle task's `bundle` array is what validate() allows, and the task's own result is found
// in the bundle's result.
#include "fuzz_common.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::protocol;
    const auto [id, node_data] = split_first_line(zkd::fuzz::as_text(data, size));

    const auto ref = parse_task_ref(id);
    if (ref) {
        FUZZ_CHECK(is_valid_task_id(ref->node));
        const auto n = bundle_size(ref->node);
        if (ref->index) {
            FUZZ_CHECK(*ref->index < n);
            FUZZ_CHECK(bundled_task_id(ref->node, *ref->index) == id);
        } else {
            FUZZ_CHECK(ref->node == id);
        }
        if (n > 0) {
            const auto plain = ref->node.substr(0, task_id_length);
            FUZZ_CHECK(bundle_id(plain, n) == ref->node);
            FUZZ_CHECK(task_id_priority(plain) == task_id_priority(ref->node));
        }
    }

    if (const auto t = decode_task_node(node_data)) {
        FUZZ_CHECK(t->task.bundle.size() <= max_bundle_tasks);
        FUZZ_CHECK(t->task.bundle.empty() || t->task.args.is_null());
    }
    if (const auto r = decode_result(node_data); r && ref) {
        const auto one = bundled_result(*r, ref->index.value_or(0), std::string(id));
        if (one) {
            FUZZ_CHECK(one->task == id);
            FUZZ_CHECK(validate_bundled(*one).has_value() || !one->bundle.empty());
        }
    }
    return 0;
}
