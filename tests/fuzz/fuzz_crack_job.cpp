// SPDX-License-Identifier: MIT
// A crack job node /jobs/crack-<hash>-<id> (docs/crack.md §2), as any client may write it:
// crack::decode_crack_job. What it accepts is consistent (one partition character per task,
// a found job has its preimage) and survives encode + decode unchanged.
#include "apps/crack/job.hpp"
#include "fuzz_common.hpp"
#include "protocol/ids.hpp"

#include <algorithm>

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace zkd::crack;
    using namespace zkd::protocol;
    const auto j = decode_crack_job(zkd::fuzz::as_text(data, size));
    if (!j) {
        FUZZ_CHECK(!j.error().message.empty());
        return 0;
    }
    FUZZ_CHECK(!j->tasks.empty());
    FUZZ_CHECK(j->partitions.size() == j->tasks.size());
    FUZZ_CHECK(std::all_of(j->tasks.begin(), j->tasks.end(), [](const std::string& t) {
        return is_valid_task_id(t);
    }));
    FUZZ_CHECK(j->done() >= 0 && j->done() <= j->total());
    FUZZ_CHECK(j->state != crack_state::found || j->preimage.has_value());
    FUZZ_CHECK(j->found_partition < j->total());
    for (const auto& f : j->failed) {
        FUZZ_CHECK(f.partition >= 0 && f.partition < j->total());
    }
    const auto again = decode_crack_job(encode(*j));
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(zkd::fuzz::json_close(again->spec, j->spec));
    auto a = *again;
    auto b = *j;
    a.spec.clear();
    b.spec.clear();
    FUZZ_CHECK(a == b);
    return 0;
}
