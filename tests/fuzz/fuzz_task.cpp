// SPDX-License-Identifier: MIT
// A task node's data (docs/protocol.md §4), as any client may write it: protocol::decode_task_node,
// protocol::stamp and the JSON reader under every codec (protocol::parse_json). A node it
// accepts passes validate() and survives encode + decode unchanged; stamped with an
// assignment or a progress, it decodes to the same task with the new part and the others kept.
// Whatever the decoder refuses, a stamp never crashes on.
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

    const assignment a{2, 7, 1763733600130, "w-\"1\""};
    const progress p{1763733600200, 0.5, "half", 1763733600300};
    const auto stamped = stamp(text, a);
    const auto marked = stamp(text, p);
    const auto t = decode_task_node(text);
    if (!t) {
        FUZZ_CHECK(!t.error().message.empty());
        return 0;
    }
    FUZZ_CHECK(validate(*t).has_value());
    const auto encoded = encode(*t);
    const auto again = decode_task_node(encoded);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(zkd::fuzz::json_close(again->task.args, t->task.args));
    FUZZ_CHECK(zkd::fuzz::json_close(again->task.bundle, t->task.bundle));
    auto x = *again;
    auto y = *t;
    x.task.args = y.task.args = nullptr;
    x.task.bundle.clear();
    y.task.bundle.clear();
    FUZZ_CHECK(x == y);

    // Stamps: the rest of the node is kept as it was read (args never encoded again).
    FUZZ_CHECK(stamped.has_value() && marked.has_value());
    const auto s = decode_task_node(*stamped);
    FUZZ_CHECK(s.has_value());
    FUZZ_CHECK(s->assigned == a && s->run == t->run && encode(s->task) == encode(t->task));
    const auto m = decode_task_node(*marked);
    FUZZ_CHECK(m.has_value());
    FUZZ_CHECK(m->run == p && m->assigned == t->assigned && encode(m->task) == encode(t->task));
    // Stamping what encode() wrote gives what encode() writes of the stamped node.
    auto n = *t;
    n.assigned = a;
    FUZZ_CHECK(stamp(encoded, a).value() == encode(n));
    return 0;
}
