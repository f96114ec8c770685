// SPDX-License-Identifier: MIT
// Workflow ids, step task ids and the documents kept in ZooKeeper (docs/protocol.md §11).
#include "protocol/ids.hpp"
#include "workflow/ids.hpp"
#include "workflow/spec.hpp"
#include "workflow/state.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::workflow;

namespace {

TEST(WorkflowIds, WorkflowIdRoundTrips) {
    const workflow_ref w{1763733600123, 0x3fa9c2d1};
    EXPECT_EQ(workflow_id(w), "wf-1763733600123-3fa9c2d1");
    EXPECT_EQ(parse_workflow_id("wf-1763733600123-3fa9c2d1"), w);
    EXPECT_FALSE(parse_workflow_id("wf-1763733600123-3FA9C2D1"));
    EXPECT_FALSE(parse_workflow_id("wf-176373360012x-3fa9c2d1"));
    EXPECT_FALSE(parse_workflow_id("wf-1763733600123-3fa9c2d1 "));
    EXPECT_FALSE(parse_workflow_id("t4-1763733600123-3fa9c2d1"));
    EXPECT_FALSE(parse_workflow_id(""));
    EXPECT_EQ(client_hex(0xa), "0000000a");
}

TEST(WorkflowIds, StepTaskIdsAreValidDistinctAndInvertible) {
    const workflow_ref w{1763733600123, 0x3fa9c2d1};
    EXPECT_EQ(step_task_id(w, 5, 0), "t4-1763733600123-3fa9c2d1000000");
    EXPECT_EQ(step_task_id(w, 9, 0x2a), "t0-1763733600123-3fa9c2d100002a");
    // Past 2^24 numbers the time part moves on by a millisecond.
    EXPECT_EQ(step_task_id(w, 5, (std::uint64_t{1} << 24) + 1), "t4-1763733600124-3fa9c2d1000001");
    std::set<std::string> seen;
    for (const std::uint64_t k :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0xffffff}, std::uint64_t{1} << 24,
          (std::uint64_t{1} << 24) + 7, max_task_number - 1}) {
        const auto tid = step_task_id(w, 3, k);
        EXPECT_TRUE(zkd::protocol::is_valid_task_id(tid)) << tid;
        EXPECT_EQ(zkd::protocol::task_id_client(tid), "3fa9c2d1");
        EXPECT_EQ(task_number(w, tid), k) << tid;
        EXPECT_TRUE(seen.insert(tid).second);
    }
    // Not this workflow's: another client part, an earlier time, a bundle, garbage.
    EXPECT_FALSE(task_number(w, "t4-1763733600123-3fa9c2d2000000"));
    EXPECT_FALSE(task_number(w, "t4-1763733600122-3fa9c2d1000000"));
    EXPECT_FALSE(task_number(w, "t4-1763733600123-3fa9c2d1000000_2"));
    EXPECT_FALSE(task_number(w, "nonsense"));
}

TEST(WorkflowState, HeaderRoundTripsAndRefusesGarbage) {
    workflow_header h{"demo", 3, 1, 120, 1763733600123, "0badcafe"};
    const auto text = encode_header(h);
    EXPECT_EQ(
        text, R"({"v":1,"name":"demo","steps":3,"chunks":1,"spec_bytes":120,)"
              R"("created_ms":1763733600123,"submitted_by":"0badcafe"})"
    );
    auto back = decode_header(text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, h);
    EXPECT_FALSE(decode_header("nope"));
    EXPECT_EQ(decode_header(R"({"v":2})").error().message, "unsupported format version 2");
    EXPECT_FALSE(decode_header(R"({"v":1,"steps":0,"chunks":1,"spec_bytes":0,"created_ms":1})"));
    EXPECT_FALSE(decode_header(R"({"v":1,"steps":1,"chunks":65,"spec_bytes":0,"created_ms":1})"));
    EXPECT_FALSE(decode_header(R"({"v":1,"steps":1,"chunks":1,"spec_bytes":262145,"created_ms":1})")
    );
}

TEST(WorkflowState, ChunksCoverTheText) {
    EXPECT_EQ(chunk_name(0), "spec-0000");
    EXPECT_EQ(chunk_name(63), "spec-0063");
    EXPECT_EQ(split_chunks("").size(), 1U);
    const std::string text(spec_chunk_bytes * 2 + 5, 'x');
    const auto parts = split_chunks(text);
    ASSERT_EQ(parts.size(), 3U);
    EXPECT_EQ(parts[0].size(), spec_chunk_bytes);
    EXPECT_EQ(parts[2].size(), 5U);
    EXPECT_EQ(max_spec_chunks * spec_chunk_bytes, max_spec_bytes);
}

TEST(WorkflowState, StateRoundTripsAndIsChecked) {
    workflow_state s;
    s.status = workflow_status::running;
    s.steps = "rs-";
    s.next = 10;
    s.maps = {map_alloc{2, 3, 7, 2}};
    s.errors["b"] = zkd::protocol::task_error{"bad_map_input", "not an array"};
    s.started_ms = 5;
    const auto text = encode_state(s);
    EXPECT_EQ(
        text, R"({"v":1,"status":"running","steps":"rs-","next":10,)"
              R"("maps":[{"step":2,"base":3,"count":7,"launched":2}],)"
              R"("errors":{"b":{"code":"bad_map_input","message":"not an array"}},"started_ms":5})"
    );
    auto back = decode_state(text, 3);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, s);
    EXPECT_FALSE(decode_state(text, 4));  // another number of steps
    EXPECT_FALSE(decode_state(R"({"v":1,"status":"odd","steps":"-","next":1})", 1));
    EXPECT_FALSE(decode_state(R"({"v":1,"status":"running","steps":"x","next":1})", 1));
    EXPECT_FALSE(decode_state(R"({"v":1,"status":"running","steps":"-","next":0})", 1));
    // A map entry past "next", or launching more than it holds.
    EXPECT_FALSE(decode_state(
        R"({"v":1,"status":"running","steps":"--","next":3,"maps":[{"step":1,"base":2,"count":2,"launched":0}]})",
        2
    ));
    EXPECT_FALSE(decode_state(
        R"({"v":1,"status":"running","steps":"--","next":4,"maps":[{"step":1,"base":2,"count":2,"launched":3}]})",
        2
    ));
    EXPECT_EQ(parse_workflow_status("cancelled"), workflow_status::cancelled);
    EXPECT_FALSE(parse_workflow_status("done"));
}

TEST(WorkflowIds, TheMastersCollectionLeavesWorkflowsResultsAlone) {
    const workflow_ref a{1'700'000'000'000, 0xabcdef01};
    const workflow_ref b{1'700'000'000'001, 0x00000002};
    const std::vector<std::string> dirs{
        "/results/00", "/results/01", "/results/abcdef01", "/results/00000002",
        "/results/12345678"};
    EXPECT_EQ(
        without_workflow_results(dirs, {workflow_id(a), workflow_id(b), "wf-garbage", "x"}),
        (std::vector<std::string>{"/results/00", "/results/01", "/results/12345678"})
    );
    EXPECT_EQ(without_workflow_results(dirs, {}), dirs);
    EXPECT_EQ(workflows_dir(), "/workflows");
}

}  // namespace

}  // namespace ZKD_UNITY_ID
