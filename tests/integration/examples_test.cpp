// SPDX-License-Identifier: MIT
// The embedding example, built with the project, run against the test server.
#include "support/zk_fixture.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace ZKD_UNITY_ID {

namespace {

class Examples : public zkd::test::zk_test {};

TEST_F(Examples, AnApplicationEmbedsANodeWithItsOwnTaskType) {
    const std::string cmd = std::string(ZKD_EMBED_EXAMPLE) + " --zk " + base_ + chroot_ + " 2>&1";
    FILE* out = ::popen(cmd.c_str(), "r");
    ASSERT_NE(out, nullptr);
    std::string text;
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), out) != nullptr) {
        text += buf.data();
    }
    const int status = ::pclose(out);
    ASSERT_TRUE(WIFEXITED(status)) << text;
    EXPECT_EQ(WEXITSTATUS(status), 0) << text;
    EXPECT_NE(text.find(R"(reverse("hello, zkd") = "dkz ,olleh")"), std::string::npos) << text;
    EXPECT_NE(text.find("the application's ticker ran"), std::string::npos) << text;
}

}  // namespace

}  // namespace ZKD_UNITY_ID
