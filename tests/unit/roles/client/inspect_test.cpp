// SPDX-License-Identifier: MIT
// roles::unserved: whether a task type is served by the workers as read (what `zkd submit`
// and POST /v1/tasks refuse a task for).
#include "roles/client/inspect.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

using zkd::roles::unserved;
using zkd::roles::worker_snapshot;

worker_snapshot worker(std::string id, std::vector<std::string> types) {
    worker_snapshot w;
    w.id = std::move(id);
    w.types = std::move(types);
    return w;
}

TEST(RolesUnserved, AServedTypeIsFine) {
    const std::vector<worker_snapshot> ws{worker("w1", {"echo", "sum"}), worker("w2", {"resize"})};
    EXPECT_FALSE(unserved(ws, "echo"));
    EXPECT_FALSE(unserved(ws, "resize"));
}

TEST(RolesUnserved, NoWorkerAtAllRefusesNothing) {
    EXPECT_FALSE(unserved({}, "anything"));
    // Only garbage nodes: no worker can be told about either.
    auto g = worker("junk", {});
    g.garbage = "not a zkd worker";
    EXPECT_FALSE(unserved({g}, "anything"));
}

TEST(RolesUnserved, AnUnservedTypeSaysWhatIsServed) {
    auto g = worker("junk", {"resize"});
    g.garbage = "not a zkd worker";  // its types are not believed
    const std::vector<worker_snapshot> ws{worker("w1", {"sum", "echo"}), worker("w2", {"echo"}), g};
    const auto no = unserved(ws, "resize");
    ASSERT_TRUE(no);
    EXPECT_EQ(*no, "no worker serves task type 'resize' (the 3 workers serve: echo, sum)");
    const auto none = unserved({worker("w1", {})}, "x");
    ASSERT_TRUE(none);
    EXPECT_EQ(*none, "no worker serves task type 'x' (the 1 workers serve: nothing)");
}

}  // namespace

}  // namespace ZKD_UNITY_ID
