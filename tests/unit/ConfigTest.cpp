#include <gtest/gtest.h>

#include <map>
#include <string>

#include "Config.h"

using ppios::Config;
using ppios::Mode;

namespace {

bool parse(const std::map<std::string, std::string> &env, Config *out, std::string *error) {
  return Config::parse(
      [&](const char *name) -> const char * {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      out, error);
}

std::string error_for(const std::string &name, const std::string &value) {
  Config c;
  std::string error;
  EXPECT_FALSE(parse({{name, value}}, &c, &error)) << name << "=" << value;
  return error;
}

}  // namespace

TEST(Config, DefaultsWhenNothingIsSet) {
  Config c;
  std::string error;
  ASSERT_TRUE(parse({}, &c, &error)) << error;
  EXPECT_EQ(c.mode, Mode::PPIOS);
  EXPECT_EQ(c.cache_bytes, 256u << 20);
  EXPECT_EQ(c.subread_bytes, 256u << 10);
  EXPECT_EQ(c.coordinator.address, "shm");
  EXPECT_EQ(c.coordinator.target, "default");
  EXPECT_EQ(c.coordinator.threshold, -1);
  EXPECT_TRUE(c.stats_path.empty());
}

TEST(Config, ReadsEveryVariable) {
  Config c;
  std::string error;
  ASSERT_TRUE(parse({{"PPIOS_MODE", "pp"}, {"PPIOS_CACHE_MB", "8"}, {"PPIOS_SUBREAD_KB", "64"},
                     {"PPIOS_THRESHOLD", "4"}, {"PPIOS_TARGET", "lustre-ost0"},
                     {"PPIOS_COORDINATOR", "redis://localhost:6379/2"}, {"PPIOS_MAX_WT", "2"},
                     {"PPIOS_PT_READERS", "3"}, {"PPIOS_LEASE_MS", "500"}, {"PPIOS_MT_THROTTLE", "1"},
                     {"PPIOS_STATS", "/tmp/s.jsonl"}, {"PPIOS_TRACE", "/tmp/t"}},
                    &c, &error))
      << error;
  EXPECT_EQ(c.mode, Mode::PP);
  EXPECT_EQ(c.cache_bytes, 8u << 20);
  EXPECT_EQ(c.subread_bytes, 64u << 10);
  EXPECT_EQ(c.coordinator.threshold, 4);
  EXPECT_EQ(c.coordinator.target, "lustre-ost0");
  EXPECT_EQ(c.coordinator.address, "redis://localhost:6379/2");
  EXPECT_EQ(c.max_waiting_threads, 2);
  EXPECT_EQ(c.pt_readers, 3);
  EXPECT_EQ(c.coordinator.lease_ms, 500);
  EXPECT_EQ(c.coordinator.mt_at_cap, ppios::MtAtCap::Wait);
  EXPECT_EQ(c.stats_path, "/tmp/s.jsonl");
  EXPECT_EQ(c.trace_prefix, "/tmp/t");
}

// MTs wait at a cap given as a number (the paper's cap on every access); under auto or
// without a threshold of their own the target's controller decides (Learned); an explicit
// PPIOS_MT_THROTTLE wins either way.
TEST(Config, MtsWaitAtANumericThresholdAndFollowTheControllerOtherwise) {
  using ppios::MtAtCap;
  auto rule = [](const std::map<std::string, std::string> &env) {
    Config c;
    std::string error;
    EXPECT_TRUE(parse(env, &c, &error)) << error;
    return c.coordinator.mt_at_cap;
  };
  EXPECT_EQ(rule({}), MtAtCap::Learned);
  EXPECT_EQ(rule({{"PPIOS_THRESHOLD", "4"}}), MtAtCap::Wait);
  EXPECT_EQ(rule({{"PPIOS_THRESHOLD", "auto"}}), MtAtCap::Learned);
  EXPECT_EQ(rule({{"PPIOS_THRESHOLD", "4"}, {"PPIOS_MT_THROTTLE", "0"}}), MtAtCap::Pass);
  EXPECT_EQ(rule({{"PPIOS_THRESHOLD", "auto"}, {"PPIOS_MT_THROTTLE", "0"}}), MtAtCap::Pass);
  EXPECT_EQ(rule({{"PPIOS_THRESHOLD", "auto"}, {"PPIOS_MT_THROTTLE", "1"}}), MtAtCap::Wait);
  EXPECT_EQ(rule({{"PPIOS_MT_THROTTLE", "1"}}), MtAtCap::Wait);
}

TEST(Config, BadValuesNameTheVariableAndTheAcceptedValues) {
  EXPECT_NE(error_for("PPIOS_THRESHOLD", "abc").find("PPIOS_THRESHOLD='abc'"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_THRESHOLD", "abc").find("whole number"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_CACHE_MB", "0").find("from 1"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_MODE", "fast").find("ppios, ppios-strict, intra, pp or off"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_SUBREAD_KB", "-4").find("PPIOS_SUBREAD_KB"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_SUBREAD_KB", "64k").find("PPIOS_SUBREAD_KB"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_PT_READERS", "0").find("from 1 to 16"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_PT_READERS", "17").find("PPIOS_PT_READERS"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_CACHE_MB", "99999999999999999999").find("PPIOS_CACHE_MB"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_COORDINATOR", "http://x").find("redis://"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_TARGET", "a b").find("PPIOS_TARGET"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_STATS", "").find("PPIOS_STATS"), std::string::npos);
  EXPECT_NE(error_for("PPIOS_MT_THROTTLE", "2").find("PPIOS_MT_THROTTLE"), std::string::npos);
}

TEST(Config, ModesByName) {
  for (auto [text, mode] : {std::pair{"off", Mode::Off}, std::pair{"pp", Mode::PP},
                            std::pair{"intra", Mode::Intra}, std::pair{"ppios", Mode::PPIOS},
                            std::pair{"ppios-strict", Mode::PPIOSStrict}}) {
    Config c;
    std::string error;
    ASSERT_TRUE(parse({{"PPIOS_MODE", text}}, &c, &error)) << error;
    EXPECT_EQ(c.mode, mode);
    EXPECT_STREQ(ppios::mode_name(mode), text);
  }
  EXPECT_NE(error_for("PPIOS_MODE", "ppios-loose").find("PPIOS_MODE='ppios-loose'"), std::string::npos);
}

TEST(Config, BackoffSwitch) {
  Config c;
  std::string error;
  ASSERT_TRUE(parse({}, &c, &error)) << error;
  EXPECT_TRUE(c.backoff);
  ASSERT_TRUE(parse({{"PPIOS_BACKOFF", "0"}}, &c, &error)) << error;
  EXPECT_FALSE(c.backoff);
  EXPECT_NE(error_for("PPIOS_BACKOFF", "yes").find("PPIOS_BACKOFF='yes'"), std::string::npos);
}

// PPIOS_VERBOSE: 0 (the default) keeps the program's stderr for configuration errors that
// stop the run; 1 also prints what goes to the statistics. Nothing else is accepted.
TEST(Config, VerboseSwitch) {
  Config c;
  std::string error;
  ASSERT_TRUE(parse({}, &c, &error)) << error;
  EXPECT_FALSE(c.verbose);
  ASSERT_TRUE(parse({{"PPIOS_VERBOSE", "1"}}, &c, &error)) << error;
  EXPECT_TRUE(c.verbose);
  ASSERT_TRUE(parse({{"PPIOS_VERBOSE", "0"}}, &c, &error)) << error;
  EXPECT_FALSE(c.verbose);
  for (const char *bad : {"2", "yes", "", "-1", " 1"}) {
    std::string message = error_for("PPIOS_VERBOSE", bad);
    EXPECT_NE(message.find(std::string("PPIOS_VERBOSE='") + bad + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("from 0 to 1"), std::string::npos) << message;
  }
}

// Every number is written plainly, by one rule for every variable (and ppios-coord's
// arguments): no sign, space or leading zero. Before, PPIOS_BACKOFF=00 was taken for 0.
TEST(Config, NumbersAreDigitsOnlyWithoutLeadingZeros) {
  for (const char *name : {"PPIOS_BACKOFF", "PPIOS_VERBOSE", "PPIOS_MT_THROTTLE", "PPIOS_THRESHOLD", "PPIOS_CACHE_MB",
                           "PPIOS_LEASE_MS"})
    for (const char *bad : {"00", "01", "+1", " 1", "1 ", "0x1", "1e3", "-0"})
      EXPECT_NE(error_for(name, bad).find(std::string(name) + "='" + bad + "' is not valid"), std::string::npos)
          << name << "='" << bad << "'";
  Config c;
  std::string error;
  ASSERT_TRUE(parse({{"PPIOS_BACKOFF", "0"}, {"PPIOS_THRESHOLD", "10"}, {"PPIOS_LEASE_MS", "100"}}, &c, &error))
      << error;
  EXPECT_FALSE(c.backoff);
  EXPECT_EQ(c.coordinator.threshold, 10);
}

// The program's stderr shows a bad PPIOS_COORDINATOR with its password masked, whatever
// the scheme or the slip.
TEST(Config, ABadCoordinatorAddressNeverShowsThePassword) {
  for (const char *bad : {"rediss://:s3cret@host:6379", "tcp://:s3cret@host:6379", "Redis://:s3cret@host",
                          "redis//:s3cret@host:6379", "redis:/:s3cret@host", "redis://s3cret@host:x",
                          "node+rediss://user:s3cret@h", "unix:///r.sock?db=x&Password=s3cret", "redis://:s3cret",
                          "redis://h:s3cret/0"}) {
    std::string error = error_for("PPIOS_COORDINATOR", bad);
    EXPECT_NE(error.find("PPIOS_COORDINATOR="), std::string::npos) << error;
    EXPECT_EQ(error.find("s3cret"), std::string::npos) << error;
  }
}

// Every number's range as docs/configuration.md gives it, at both ends: the bounds are
// taken, one past either is refused with a message that names the variable and the range.
TEST(Config, EveryNumberIsCheckedAtBothEndsOfItsRange) {
  struct Range {
    const char *name, *min, *max, *below, *above;
  };
  const Range ranges[] = {
      {"PPIOS_CACHE_MB", "1", "1048576", "0", "1048577"},     {"PPIOS_SUBREAD_KB", "4", "1048576", "3", "1048577"},
      {"PPIOS_MAX_WT", "0", "64", nullptr, "65"},             {"PPIOS_PT_READERS", "1", "16", "0", "17"},
      {"PPIOS_LEASE_MS", "100", "3600000", "99", "3600001"}, {"PPIOS_THRESHOLD", "1", "1048576", "0", "1048577"},
      {"PPIOS_MT_THROTTLE", "0", "1", nullptr, "2"},          {"PPIOS_BACKOFF", "0", "1", nullptr, "2"},
      {"PPIOS_VERBOSE", "0", "1", nullptr, "2"},
  };
  for (const Range &r : ranges) {
    for (const char *ok : {r.min, r.max}) {
      Config c;
      std::string error;
      EXPECT_TRUE(parse({{r.name, ok}}, &c, &error)) << r.name << "=" << ok << ": " << error;
    }
    for (const char *bad : {r.below, r.above}) {
      if (bad == nullptr) continue;
      std::string message = error_for(r.name, bad);
      EXPECT_NE(message.find(std::string(r.name) + "='" + bad + "' is not valid"), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("from ") + r.min + " to " + r.max), std::string::npos) << message;
    }
  }
}

// Names (1-64 of A-Za-z0-9._-), paths (not empty) and groups (one the caller can name).
TEST(Config, NamesPathsAndGroupsAreChecked) {
  const std::string longest(64, 'a'), too_long(65, 'a');
  for (const char *name : {"PPIOS_TARGET", "PPIOS_SIM_NODE"}) {
    for (const std::string &ok : {std::string("a"), std::string("lustre-OST_0.1"), longest}) {
      Config c;
      std::string error;
      EXPECT_TRUE(parse({{name, ok}}, &c, &error)) << name << "=" << ok << ": " << error;
    }
    for (const std::string &bad : {std::string(""), too_long, std::string("a/b"), std::string("a b")}) {
      std::string message = error_for(name, bad);
      EXPECT_NE(message.find(std::string(name) + "='" + bad + "' is not valid"), std::string::npos) << message;
      EXPECT_NE(message.find("1 to 64 characters"), std::string::npos) << message;
    }
  }
  for (const char *name : {"PPIOS_STATS", "PPIOS_TRACE"})
    EXPECT_NE(error_for(name, "").find(std::string(name) + " is set but empty"), std::string::npos) << name;
  std::string group = error_for("PPIOS_SHM_GROUP", "no-such-group-ppios");
  EXPECT_NE(group.find("PPIOS_SHM_GROUP='no-such-group-ppios' is not a group name or number"), std::string::npos)
      << group;
  for (const char *ok : {"shm", "redis://h:1/2", "redis://:pw@h:6379", "unix:///p.sock?db=1&password=x",
                         "node+redis://h:1", "node+unix:///p.sock"}) {
    Config c;
    std::string error;
    EXPECT_TRUE(parse({{"PPIOS_COORDINATOR", ok}}, &c, &error)) << ok << ": " << error;
  }
}

// A job on several nodes drops everything prefetched at every synchronization
// (Coherence.WithoutAnExactTableEveryAcquirePointDropsEverything); whether it is on one
// node is what the launcher says: all ranks local, or a singleton. Anything else counts
// as several nodes.
TEST(Config, AJobIsOnOneNodeOnlyWhenTheLauncherSaysSo) {
  auto one_node = [](const std::map<std::string, std::string> &env) {
    Config c;
    std::string error;
    EXPECT_TRUE(parse(env, &c, &error)) << error;
    return c.job_on_one_node;
  };
  EXPECT_TRUE(one_node({}));  // a singleton
  EXPECT_TRUE(one_node({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  EXPECT_FALSE(one_node({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_FALSE(one_node({{"OMPI_COMM_WORLD_SIZE", "4"}}));
  EXPECT_TRUE(one_node({{"PMI_SIZE", "3"}, {"MPI_LOCALNRANKS", "3"}}));
  EXPECT_FALSE(one_node({{"PMI_SIZE", "3"}, {"MPI_LOCALNRANKS", "1"}}));
  EXPECT_FALSE(one_node({{"PMIX_RANK", "0"}}));
}
