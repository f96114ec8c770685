// SPDX-License-Identifier: MIT
// The config file's syntax (cli::parse_config): comments, quotes, unknown keys.
#include "cli/options.hpp"

#include <gtest/gtest.h>

#include <string>

using zkd::cli::parse_config;
using zkd::cli::usage_error;

namespace {

std::string refusal(const std::string& text) {
    try {
        (void)parse_config(text, "zkd.conf");
    } catch (const usage_error& e) {
        return e.what();
    }
    return "accepted";
}

TEST(CliConfig, DropsACommentAfterAValue) {
    const auto keys = parse_config(
        "# a comment\n"
        "  # an indented one\n"
        "grace = 30s   # how long tasks may finish\n"
        "zk = 10.0.0.1:2181\t# tab before it\n"
        "exec.x = /bin/cat -n # numbered\n"
        "exec.x.timeout = 4m30s #\n",
        "zkd.conf"
    );
    EXPECT_EQ(keys.at("--grace").value, "30s");
    EXPECT_EQ(keys.at("--grace").where, "zkd.conf:3");
    EXPECT_EQ(keys.at("--zk").value, "10.0.0.1:2181");
    EXPECT_EQ(keys.at("--exec.x").value, "/bin/cat -n");
    EXPECT_EQ(keys.at("--exec.x.timeout").value, "4m30s");
    EXPECT_EQ(keys.size(), 4U);
}

TEST(CliConfig, KeepsAHashInsideAWordOrQuotes) {
    const auto keys = parse_config(
        "http-token = abc#def\n"
        "password = \"secret # not a comment\"  # a comment\n"
        "user = 'x #y'\n"
        "host = \"unterminated # cut here\n",
        "zkd.conf"
    );
    EXPECT_EQ(keys.at("--http-token").value, "abc#def");
    EXPECT_EQ(keys.at("--password").value, "secret # not a comment");
    EXPECT_EQ(keys.at("--user").value, "x #y");
    EXPECT_EQ(keys.at("--host").value, "\"unterminated");
}

TEST(CliConfig, RefusesAnUnknownKeyWithTheNearestOne) {
    EXPECT_EQ(
        refusal("zk = h:1\ncapasity = 3\n"),
        "zkd.conf:2: unknown key 'capasity' (did you mean 'capacity'?)"
    );
    EXPECT_EQ(refusal("colour = red\n"), "zkd.conf:1: unknown key 'colour'");
    EXPECT_EQ(refusal("zk # = h:1\n"), "zkd.conf:1: expected 'key = value'");
}

}  // namespace
