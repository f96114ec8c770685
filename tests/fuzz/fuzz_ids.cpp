// SPDX-License-Identifier: MIT
// Names any member of the namespace can create (docs/protocol.md §2, §3, §7): task ids,
// bundle ids and bundled task refs, member ids, /election children, and the state names
// read from nodes. What a parser accepts it can also produce.
#include "apps/crack/job.hpp"
#include "fuzz_common.hpp"
#include "protocol/ids.hpp"
#include "protocol/placement.hpp"
#include "protocol/task.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::crack;
    using namespace zkd::protocol;
    const auto s = zkd::fuzz::as_text(data, size);

    const bool valid = is_valid_task_id(s);
    const auto priority = task_id_priority(s);
    FUZZ_CHECK(valid == priority.has_value());
    if (priority) {
        FUZZ_CHECK(*priority >= 0 && *priority <= 9);
    }
    const auto n = bundle_size(s);
    FUZZ_CHECK(n <= max_bundle_tasks);
    if (n > 0) {
        FUZZ_CHECK(valid);
        FUZZ_CHECK(bundle_id(s.substr(0, task_id_length), n) == s);
    }
    if (valid) {
        FUZZ_CHECK(s.size() >= task_id_length);
        FUZZ_CHECK(is_valid_task_id(s.substr(0, task_id_length)));
    }
    for (const std::uint32_t shards : {1U, 16U, 4096U}) {
        FUZZ_CHECK(shard_of(s, shards) < shards);
    }
    if (const auto ref = parse_task_ref(s)) {
        FUZZ_CHECK(is_valid_task_id(ref->node));
    }

    const bool member = is_valid_member_id(s);
    if (member) {
        FUZZ_CHECK(s.size() <= max_member_host_length + 1 + 19 + 1 + 8);
    }
    if (const auto e = parse_election_node(s)) {
        FUZZ_CHECK(is_valid_member_id(e->member));
        FUZZ_CHECK(e->sequence >= 0);
        FUZZ_CHECK(election_node_prefix(e->member) == s.substr(0, s.size() - 10));
    }

    if (const auto st = parse_task_state(s)) {
        FUZZ_CHECK(to_string(*st) == s);
    }
    if (const auto cs = parse_crack_state(s)) {
        FUZZ_CHECK(to_string(*cs) == s);
    }
    if (const auto p = parse_placement_policy(s)) {
        FUZZ_CHECK(to_string(*p) == s);
    }
    return 0;
}
