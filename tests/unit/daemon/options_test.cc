#include "daemon/options.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "status_assertions.h"

namespace ktesio::daemon {
namespace {

TEST(DaemonFlags, ParsesEveryFlag) {
  auto options = ParseDaemonFlags({"--state-dir", "/s", "--socket=/x.sock", "--config", "/c",
                                   "--system", "--log-level", "debug", "--socket-group", "ops"});
  KT_ASSERT_OK(options.status());
  EXPECT_EQ(options->paths.state_dir, "/s");
  EXPECT_EQ(options->paths.socket_path, "/x.sock");
  EXPECT_EQ(options->paths.config_path, "/c");
  EXPECT_TRUE(options->paths.system_mode);
  EXPECT_EQ(options->log_level, "debug");
  EXPECT_EQ(options->socket_group, "ops");
}

TEST(DaemonFlags, RejectsBadInput) {
  EXPECT_FALSE(ParseDaemonFlags({"--state-dir"}).ok());
  EXPECT_FALSE(ParseDaemonFlags({"--log-level", "loud"}).ok());
  EXPECT_FALSE(ParseDaemonFlags({"--socket="}).ok());
  EXPECT_FALSE(ParseDaemonFlags({"positional"}).ok());
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/kt-cfg-XXXXXX";
    dir_ = mkdtemp(templ);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    std::string path = dir_ + "/ktesiod.toml";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(ConfigFileTest, MissingOptionalFileIsFine) {
  DaemonOptions options;
  KT_EXPECT_OK(ApplyConfigFile(dir_ + "/none.toml", false, options));
  EXPECT_FALSE(ApplyConfigFile(dir_ + "/none.toml", true, options).ok());
}

TEST_F(ConfigFileTest, AppliesValuesUnderFlags) {
  DaemonOptions options;
  KT_ASSERT_OK(ApplyConfigFile(Write("version = 1\nlog_level = \"warn\"\nsocket_group = \"g\"\n"),
                               true, options));
  EXPECT_EQ(options.log_level, "warn");
  EXPECT_EQ(options.socket_group, "g");
  KT_ASSERT_OK(ApplyConfigFile(
      Write("metering_ca_file = \"/etc/ktesio/ca.pem\"\nmetering_max_request_bytes = 4096\n"), true,
      options));
  EXPECT_EQ(options.metering_ca_file, "/etc/ktesio/ca.pem");
  EXPECT_EQ(options.metering_max_request_bytes, 4096u);
  EXPECT_EQ(options.stop_timeout_secs, 30u);
  EXPECT_EQ(options.max_instances, 10000u);
  EXPECT_EQ(options.max_streams, 1024u);
  EXPECT_EQ(options.api_idle_timeout_secs, 60u);
  KT_ASSERT_OK(ApplyConfigFile(
      Write("stop_timeout_secs = 0\nmax_instances = 2\nmax_streams = 100000\n"), true, options));
  EXPECT_EQ(options.stop_timeout_secs, 0u);
  EXPECT_EQ(options.max_instances, 2u);
  EXPECT_EQ(options.max_streams, 100000u);
  KT_ASSERT_OK(ApplyConfigFile(Write("socket = \"/run/kt/alt.sock\"\n"), true, options));
  EXPECT_EQ(options.config_socket, "/run/kt/alt.sock");
  DaemonOptions flagged = *ParseDaemonFlags({"--log-level", "error"});
  KT_ASSERT_OK(ApplyConfigFile(Write("log_level = \"warn\"\n"), true, flagged));
  EXPECT_EQ(flagged.log_level, "error");
}

TEST_F(ConfigFileTest, ErrorsCarryFileLineColumn) {
  DaemonOptions options;
  struct Case {
    std::string text;
    std::string needle;
  };
  const Case cases[] = {
      {"version = 2\n", ":1:"},
      {"\nlog_level = 3\n", ":2:"},
      {"log_level = \"loud\"\n", "unknown log level"},
      {"colour = true\n", "unknown key 'colour'"},
      {"log_level = \n", ":1:"},
      {"metering_ca_file = \"relative.pem\"\n", "absolute path"},
      {"metering_max_request_bytes = 10\n", "from 1024"},
      {"metering_max_request_bytes = \"big\"\n", "from 1024"},
      {"stop_timeout_secs = -1\n", "'stop_timeout_secs' must be an integer from 0 to 86400"},
      {"stop_timeout_secs = 1.5\n", "from 0 to 86400"},
      {"\n\nmax_instances = 0\n", ":3:"},
      {"max_streams = 100001\n", "'max_streams' must be an integer from 1 to 100000"},
      {"socket = \"relative.sock\"\n", "'socket' must be an absolute path"},
      {"socket = \"/" + std::string(200, 'x') + "\"\n", ":1:"},
  };
  for (const Case& c : cases) {
    absl::Status status = ApplyConfigFile(Write(c.text), true, options);
    ASSERT_FALSE(status.ok()) << c.text;
    EXPECT_NE(testing::Message(status).find(c.needle), std::string::npos)
        << c.text << " -> " << status;
    EXPECT_NE(testing::Message(status).find("ktesiod.toml"), std::string::npos);
  }
}

}  // namespace
}  // namespace ktesio::daemon

namespace ktesio::daemon {
namespace {

// Every key of the table: a good value lands in its field, an out-of-range one is refused with
// the file position and the key's range, and nothing else changes.
TEST_F(ConfigFileTest, EveryIntegerKeyChecksItsRange) {
  struct Case {
    std::string key;
    int64_t good;
    int64_t bad;
    std::string range;
  };
  const std::vector<Case> cases = {
      {"metering_max_connections", 7, 0, "from 1 to 1000000"},
      {"metering_max_connections_per_agent", 8, 1000001, "from 1 to 1000000"},
      {"metering_header_timeout_secs", 9, 3601, "from 1 to 3600"},
      {"stop_timeout_secs", 0, -1, "from 0 to 86400"},
      {"max_instances", 11, 0, "from 1 to 1000000"},
      {"max_streams", 12, 100001, "from 1 to 100000"},
      {"api_idle_timeout_secs", 14, 0, "from 1 to 86400"},
      {"memory_trim_idle_secs", 0, 86401, "from 0 to 86400 (0 = never)"},
      {"retention_events_secs", 0, -1, "from 0 to 1099511627776 (0 = no limit)"},
      {"retention_interval_secs", 13, 0, "from 1 to 1099511627776"},
  };
  for (const Case& c : cases) {
    DaemonOptions options;
    KT_ASSERT_OK(
        ApplyConfigFile(Write(c.key + " = " + std::to_string(c.good) + "\n"), true, options));
    DaemonOptions refused = options;
    absl::Status status =
        ApplyConfigFile(Write("\n" + c.key + " = " + std::to_string(c.bad) + "\n"), true, refused);
    ASSERT_FALSE(status.ok()) << c.key;
    EXPECT_NE(std::string(status.message()).find(":2:"), std::string::npos) << status;
    EXPECT_NE(std::string(status.message()).find("'" + c.key + "' must be an integer " + c.range),
              std::string::npos)
        << status;
  }
  DaemonOptions options;
  KT_ASSERT_OK(
      ApplyConfigFile(Write("max_streams = 12\nretention_interval_secs = 13\n"), true, options));
  EXPECT_EQ(options.max_streams, 12u);
  EXPECT_EQ(options.retention_interval_secs, 13);
  EXPECT_EQ(options.memory_trim_idle_secs, 30u);  // the default
  KT_ASSERT_OK(ApplyConfigFile(Write("memory_trim_idle_secs = 5\n"), true, options));
  EXPECT_EQ(options.memory_trim_idle_secs, 5u);
}

TEST_F(ConfigFileTest, RelaySchedulingIsBatchUnlessNormal) {
  DaemonOptions options;
  EXPECT_TRUE(options.metering_relay_batch);  // the default
  KT_ASSERT_OK(ApplyConfigFile(Write("metering_relay_scheduling = \"normal\"\n"), true, options));
  EXPECT_FALSE(options.metering_relay_batch);
  KT_ASSERT_OK(ApplyConfigFile(Write("metering_relay_scheduling = \"batch\"\n"), true, options));
  EXPECT_TRUE(options.metering_relay_batch);
  for (const std::string value : {"\"fifo\"", "\"BATCH\"", "\"\"", "1", "true"}) {
    DaemonOptions refused;
    refused.metering_relay_batch = false;
    absl::Status status =
        ApplyConfigFile(Write("metering_relay_scheduling = " + value + "\n"), true, refused);
    ASSERT_FALSE(status.ok()) << value;
    EXPECT_NE(std::string(status.message())
                  .find("'metering_relay_scheduling' must be \"batch\" or \"normal\""),
              std::string::npos)
        << status;
    EXPECT_FALSE(refused.metering_relay_batch) << value << " changed the option";
  }
}

TEST_F(ConfigFileTest, UnknownKeysNameTheirFamily) {
  DaemonOptions options;
  for (const auto& [key, family] : std::vector<std::pair<std::string, std::string>>{
           {"otlp_nope", "known otlp_ keys: otlp_endpoint"},
           {"retention_nope", "retention keys: retention_events_secs"},
           {"nope", "known: version, log_level"}}) {
    absl::Status status = ApplyConfigFile(Write(key + " = 1\n"), true, options);
    EXPECT_NE(std::string(status.message()).find("unknown key '" + key + "' (" + family),
              std::string::npos)
        << status;
  }
}

}  // namespace
}  // namespace ktesio::daemon
