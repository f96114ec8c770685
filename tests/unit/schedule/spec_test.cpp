// SPDX-License-Identifier: MIT
// A schedule's document: what a user asks for and its refusals, the stored document and
// garbage, the task a firing submits, the transactions (docs/protocol.md §12).
#include "schedule/spec.hpp"

#include "protocol/task.hpp"
#include "schedule/firing.hpp"
#include "schedule/txn.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::schedule;
namespace protocol = zkd::protocol;

namespace {

boost::json::value json_of(std::string_view text) {
    boost::system::error_code ec;
    auto v = protocol::parse_json(text, ec);
    EXPECT_FALSE(ec) << text;
    return v;
}

std::string error_of(std::string_view text) {
    auto s = parse_request(json_of(text));
    EXPECT_FALSE(s.has_value()) << text;
    return s ? std::string{} : s.error().message;
}

TEST(ScheduleSpec, ParsesAnEveryRequestWithOptions) {
    auto s = parse_request(json_of(
        R"({"name":"tick-1","every_ms":1000,"type":"echo","args":{"a":1},"priority":7,
            "timeout_ms":500,"max_attempts":2,"retries":3,"misfire":"all","no_overlap":true})"
    ));
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->name, "tick-1");
    EXPECT_EQ(s->every_ms, 1000);
    EXPECT_EQ(s->type, "echo");
    EXPECT_EQ(protocol::to_text(s->args), R"({"a":1})");
    EXPECT_EQ(s->priority, 7);
    EXPECT_EQ(s->timeout_ms, 500);
    EXPECT_EQ(s->max_attempts, 2);
    EXPECT_EQ(s->retries, 3);
    EXPECT_EQ(s->misfire, misfire_policy::all);
    EXPECT_TRUE(s->no_overlap);
    EXPECT_FALSE(s->paused);
}

TEST(ScheduleSpec, ParsesACronRequestWithDefaults) {
    auto s =
        parse_request(json_of(R"({"name":"nightly","cron":"30 2 * * *","tz":"UTC","type":"sum"})"));
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->every_ms, 0);
    EXPECT_EQ(s->cron, "30 2 * * *");
    EXPECT_TRUE(s->cron_parsed.minutes.test(30));
    EXPECT_EQ(s->priority, protocol::default_priority);
    EXPECT_EQ(s->max_attempts, 3);
    EXPECT_EQ(s->retries, std::nullopt);
    EXPECT_EQ(s->misfire, misfire_policy::once);
}

TEST(ScheduleSpec, RefusesWithPreciseMessages) {
    EXPECT_EQ(error_of("[]"), "a schedule is a JSON object");
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"type":"echo","evry_ms":1})"),
        "unknown field \"evry_ms\" (did you mean \"every_ms\"?)"
    );
    EXPECT_EQ(
        error_of(R"({"name":".x","every_ms":1000,"type":"echo"})"),
        "a schedule's \"name\" is 1 to 64 characters of [A-Za-z0-9_.-], not starting with '.'"
    );
    EXPECT_NE(
        error_of(R"({"name":"a/b","every_ms":1000,"type":"echo"})").find("\"name\""),
        std::string::npos
    );
    EXPECT_NE(error_of(R"({"every_ms":1000,"type":"echo"})").find("\"name\""), std::string::npos);
    EXPECT_EQ(
        error_of(R"({"name":"a","type":"echo"})"),
        "a schedule has exactly one of \"every_ms\" and \"cron\""
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"cron":"* * * * *","type":"echo"})"),
        "a schedule has exactly one of \"every_ms\" and \"cron\""
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":999,"type":"echo"})"),
        "\"every_ms\" must be an integer from 1000 to 31622400000"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","cron":"61 * * * *","type":"echo"})"),
        "cron field minute \"61\": 61 is out of 0-59"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","cron":"0 0 30 2 *","type":"echo"})"),
        "the cron expression \"0 0 30 2 *\" never matches a date"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","cron":"0 0 * * *","tz":"Mars/Olympus","type":"echo"})"),
        "unknown time zone \"Mars/Olympus\" (the tz database's names, like Europe/Paris, or UTC)"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","cron":"0 0 * * *","tz":"../etc/passwd","type":"echo"})"),
        "\"../etc/passwd\" is no time zone name (like Europe/Paris)"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"tz":"UTC","type":"echo"})"),
        "\"tz\" goes with \"cron\" only"
    );
    EXPECT_EQ(error_of(R"({"name":"a","every_ms":1000})"), "\"type\" is required");
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"type":"bad type"})"),
        "\"type\" must be 1 to 128 characters of [A-Za-z0-9_.:-]"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"type":"echo","priority":10})"),
        "\"priority\" must be an integer from 0 to 9"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"type":"echo","retries":101})"),
        "\"retries\" must be an integer from 0 to 100"
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"type":"echo","misfire":"never"})"),
        "\"misfire\" must be \"once\", \"skip\" or \"all\""
    );
    EXPECT_EQ(
        error_of(R"({"name":"a","every_ms":1000,"type":"echo","no_overlap":1})"),
        "\"no_overlap\" must be true or false"
    );
    const std::string big(std::size_t{600} * 1024, 'x');
    EXPECT_NE(
        error_of(R"({"name":"a","every_ms":1000,"type":"echo","args":")" + big + "\"}")
            .find("a task may hold"),
        std::string::npos
    );
}

TEST(ScheduleSpec, ZonesComeFromTheLoader) {
    auto paris = std::make_shared<zone>();
    paris->name = "Europe/Paris";
    paris->rule = parse_posix_tz("CET-1CEST,M3.5.0,M10.5.0/3");
    const zone_loader zones = [paris](std::string_view name) -> std::shared_ptr<const zone> {
        return name == "Europe/Paris" ? paris : nullptr;
    };
    auto s = parse_request(
        json_of(R"({"name":"z","cron":"0 9 * * *","tz":"Europe/Paris","type":"echo"})"), zones
    );
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->tz, "Europe/Paris");
    EXPECT_EQ(s->zone_rules, paris);
    s->client = "00000001";
    s->created_ms = 1'800'000'000'000;  // 2027-01-15T08:00:00Z: 09:00 in Paris
    s->last_due_ms = s->created_ms;
    EXPECT_EQ(next_due(*s, s->created_ms), 1'800'000'000'000 + 86'400'000);
    auto back = decode("z", encode(*s), zones);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, *s);
    // A master without the zone: the document is refused (logged, not fired), not misread.
    EXPECT_FALSE(decode("z", encode(*s)));
    // UTC needs no loader.
    auto utc =
        parse_request(json_of(R"({"name":"u","cron":"0 9 * * *","tz":"UTC","type":"echo"})"));
    ASSERT_TRUE(utc) << utc.error().message;
    EXPECT_EQ(utc->zone_rules, nullptr);
}

TEST(ScheduleSpec, NamesAreZooKeeperSafe) {
    EXPECT_TRUE(is_valid_name("a"));
    EXPECT_TRUE(is_valid_name("nightly.report_2-x"));
    EXPECT_TRUE(is_valid_name(std::string(64, 'a')));
    EXPECT_FALSE(is_valid_name(std::string(65, 'a')));
    EXPECT_FALSE(is_valid_name(""));
    EXPECT_FALSE(is_valid_name("."));
    EXPECT_FALSE(is_valid_name(".."));
    EXPECT_FALSE(is_valid_name("a b"));
    EXPECT_FALSE(is_valid_name("a/b"));
}

schedule stored() {
    auto s = parse_request(json_of(
        R"({"name":"n","every_ms":2000,"type":"echo","args":[1,2],"priority":8,"retries":1,"no_overlap":true})"
    ));
    EXPECT_TRUE(s);
    s->client = "00c0ffee";
    s->created_ms = 1'800'000'000'000;
    s->last_due_ms = 1'800'000'010'000;
    s->last_fired_ms = 1'800'000'008'000;
    s->fired = 4;
    s->skipped = 1;
    s->missed = 0;
    return *s;
}

TEST(ScheduleSpec, DocumentRoundTrips) {
    const auto s = stored();
    const auto text = encode(s);
    auto back = decode("n", text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, s);
    auto c = parse_request(json_of(R"({"name":"c","cron":"@hourly","type":"echo","paused":true})"))
                 .value();
    c.client = "00000001";
    c.created_ms = 5;
    c.last_due_ms = 5;
    auto cback = decode("c", encode(c));
    ASSERT_TRUE(cback) << cback.error().message;
    EXPECT_EQ(*cback, c);
}

TEST(ScheduleSpec, GarbageDocumentsAreRefusedNotThrown) {
    for (const auto* bad : {
             "",
             "not json",
             "[]",
             R"({"v":2})",
             R"({"v":1})",
             R"({"v":1,"every_ms":1000,"type":"echo"})",  // no client
             R"({"v":1,"every_ms":1000,"type":"echo","client":"XYZ"})",
             R"({"v":1,"every_ms":1000,"type":"echo","client":"00000001"})",  // no created_ms
             R"({"v":1,"every_ms":1000,"type":"echo","client":"00000001","created_ms":1,"fired":-1})",
             R"({"v":1,"cron":"nope","type":"echo","client":"00000001","created_ms":1})",
         }) {
        EXPECT_FALSE(decode("n", bad)) << bad;
    }
    EXPECT_FALSE(decode("..", encode(stored())));
}

TEST(ScheduleSpec, FiringTaskIsAnOrdinaryTask) {
    const auto s = stored();
    auto data = firing_task(s, 1'800'000'012'000);
    ASSERT_TRUE(data) << data.error().message;
    auto node = protocol::decode_task_node(*data);
    ASSERT_TRUE(node) << node.error().message;
    EXPECT_EQ(node->task.type, "echo");
    EXPECT_EQ(protocol::to_text(node->task.args), "[1,2]");
    EXPECT_EQ(node->task.priority, 8);
    EXPECT_EQ(node->task.client, "00c0ffee");
    EXPECT_EQ(node->task.submitted_ms, 1'800'000'012'000);
    EXPECT_NE(data->find("\"retries\":1"), std::string::npos);
}

TEST(ScheduleSpec, ToJsonCarriesNameAndNext) {
    auto s = stored();
    auto o = to_json(s);
    EXPECT_EQ(o.at("name").as_string(), "n");
    EXPECT_EQ(o.at("next_ms").as_int64(), 1'800'000'012'000);
    EXPECT_EQ(o.at("fired").to_number<std::int64_t>(), 4);
    EXPECT_FALSE(o.contains("v"));
    s.paused = true;
    EXPECT_FALSE(to_json(s).contains("next_ms"));
}

TEST(ScheduleTxn, AddChangeRemoveAndFire) {
    const auto s = stored();
    auto add = add_ops(s);
    ASSERT_EQ(add.size(), 3U);
    EXPECT_EQ(add[0].path, "/results/00c0ffee");
    EXPECT_EQ(add[1].path, "/schedules/n");
    EXPECT_EQ(add[2].path, "/schedules");
    EXPECT_EQ(read_change_note(add[2].data), "n");
    EXPECT_EQ(read_change_note(""), std::nullopt);
    EXPECT_EQ(read_change_note(R"({"v":1,"changed":"a/b"})"), std::nullopt);
    auto ch = change_ops(s, 7);
    EXPECT_EQ(ch[0].version, 7);
    auto rm = remove_ops("n");
    EXPECT_EQ(rm[0].what, protocol::txn_op::kind::remove);

    protocol::layout l;
    l.pending_shards = 4;
    std::vector<firing_write> writes(2);
    writes[0] = {"n", 3, encode(s), {{firing_task_id(s.client, 8, 1'800'000'012'000), "{}"}}};
    writes[1] = {"m", 0, "{}", {}};
    auto f = fire_ops(l, 9, writes);
    ASSERT_EQ(f.ops.size(), f.owner.size());
    EXPECT_EQ(f.ops[0].path, "/epoch");
    EXPECT_EQ(f.ops[0].version, 9);
    EXPECT_EQ(f.ops[1].path, "/schedules/n");
    EXPECT_EQ(f.ops[1].version, 3);
    EXPECT_EQ(f.owner[1], 0);
    EXPECT_EQ(f.ops[2].what, protocol::txn_op::kind::create);
    EXPECT_EQ(f.owner[2], 0);
    EXPECT_EQ(f.ops[3].path, "/schedules/m");
    EXPECT_EQ(f.owner[3], 1);
    ASSERT_EQ(f.ops.size(), 5U);  // one change log
    EXPECT_EQ(f.owner[4], -1);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
