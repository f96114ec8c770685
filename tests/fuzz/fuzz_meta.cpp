// SPDX-License-Identifier: MIT
// /meta, /cancel/<tid> and the change logs in the data of /pending/<s> and /assign/<member>
// (docs/protocol.md §2, §6), as anyone may write them: protocol::decode_meta (shard counts
// within 1..max_shards), decode_cancel and decode_change_log (at most max_log_entries, each
// a child name). What they accept survives encode + decode.
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
    if (const auto log = decode_change_log(text)) {
        FUZZ_CHECK(log->created.size() <= max_log_entries);
        for (const auto& e : log->created) {
            FUZZ_CHECK(!e.name.empty() && e.name.find('/') == std::string::npos);
        }
        const auto again = decode_change_log(encode(*log));
        FUZZ_CHECK(again.has_value());
        FUZZ_CHECK(*again == *log);
    } else {
        FUZZ_CHECK(!log.error().message.empty());
    }
    if (const auto c = decode_cancel(text)) {
        const auto again = decode_cancel(encode(*c));
        FUZZ_CHECK(again.has_value());
        FUZZ_CHECK(*again == *c);
    }
    return 0;
}
