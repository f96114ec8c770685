// SPDX-License-Identifier: MIT
// The config file's syntax (cli::parse_config), with the exec settings it carries: comments,
// quotes, unknown keys, and the example docs/exec.md gives.
#include "cli/options.hpp"

#include "handlers/exec.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using zkd::cli::parse_config;
using zkd::cli::usage_error;
using namespace std::chrono_literals;

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

/// The ```ini block of docs/exec.md, as an operator would paste it.
std::string exec_docs_example() {
    std::ifstream in(std::string(ZKD_SOURCE_DIR) + "/docs/exec.md");
    std::stringstream text;
    text << in.rdbuf();
    const std::string doc = text.str();
    const auto begin = doc.find("```ini\n");
    const auto end = doc.find("```\n", begin + 7);
    EXPECT_NE(begin, std::string::npos);
    return begin == std::string::npos ? "" : doc.substr(begin + 7, end - begin - 7);
}

TEST(CliConfig, TheExampleOfTheExecDocsWorksAsPasted) {
    const auto keys = parse_config(exec_docs_example(), "zkd.conf");
    std::vector<zkd::handlers::exec::file_setting> file;
    for (const auto& [key, entry] : keys) {
        ASSERT_TRUE(key.starts_with("--exec.")) << key;
        file.push_back({key.substr(7), entry.value, entry.where});
    }
    const auto types = zkd::handlers::exec::configure(file, {});
    ASSERT_EQ(types.size(), 1U);
    const auto& c = types.at("resize");
    EXPECT_EQ(c.argv, (std::vector<std::string>{"/usr/local/bin/resize", "--quality", "90"}));
    EXPECT_EQ(c.timeout, 30s);
    EXPECT_EQ(c.max_timeout, 5min);
    EXPECT_EQ(c.max_output, 512U * 1024);
    EXPECT_EQ(c.concurrency, 2);
    EXPECT_EQ(c.env, (std::vector<std::string>{"PATH", "LANG", "MODE=fast"}));
    EXPECT_EQ(c.dir, "/srv/images");
    EXPECT_EQ(c.user, "nobody");
    EXPECT_EQ(c.kill_grace, 5s);
}

TEST(CliOpenCluster, LoopbackHostsAreLocalhostAnd127And1) {
    using zkd::cli::is_loopback_host;
    for (const auto* h :
         {"localhost", "LocalHost", "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
        EXPECT_TRUE(is_loopback_host(h)) << h;
    }
    for (const auto* h :
         {"10.0.0.1", "192.0.2.1", "::", "fe80::1", "zk1", "zk1.example.com",
          "localhost.example.com", "128.0.0.1", "::ffff:10.0.0.1"}) {
        EXPECT_FALSE(is_loopback_host(h)) << h;
    }
}

TEST(CliOpenCluster, WarnsWithoutCredentialsWhenAHostIsNotLoopback) {
    zkd::cli::cluster_target t;
    t.chroot = "/zkd/default";
    t.hosts = "127.0.0.1:2181,localhost:2182,[::1]:2183/apps";
    EXPECT_EQ(zkd::cli::open_cluster_warning(t), "");
    t.hosts = "127.0.0.1:2181,zk2:2181";
    const auto w = zkd::cli::open_cluster_warning(t);
    EXPECT_NE(
        w.find("open to every client of the ZooKeeper ensemble (zk2 is not loopback)"),
        std::string::npos
    ) << w;
    EXPECT_NE(w.find("--user NAME with --password-file FILE"), std::string::npos) << w;
    t.auth = zkd::zkco::credentials{"u", "p"};
    EXPECT_EQ(zkd::cli::open_cluster_warning(t), "");
}

}  // namespace

}  // namespace ZKD_UNITY_ID
