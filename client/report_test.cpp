// Report: the JSON shape the runner consumes, and CSV header/row agreement.
#include "client/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kv {
namespace {

RunReport SampleRun(double rate) {
  RunReport run;
  run.config.workload.n = 100;
  EXPECT_TRUE(Endpoint::Make("127.0.0.1", 47115, &run.config.endpoint).ok());
  run.given_port = 3000;
  run.config.threads = 4;
  run.config.requests = 1000;
  run.config.rate = rate;
  run.result.ok = 990;
  run.result.errors[static_cast<int>(ErrorKind::kTimeout)] = 7;
  run.result.errors[static_cast<int>(ErrorKind::kErrorReply)] = 3;
  run.result.requests = 1000;
  run.result.elapsed_s = 2.0;
  for (uint64_t v = 1000; v < 2000; ++v) {
    run.result.latency.Record(v * 1000);
    run.result.uncorrected.Record(v * 500);
  }
  run.result.timeline = {{500, 5}, {490, 5}};
  run.result.client_ok = {250, 240, 250, 250};
  return run;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

TEST(ReportTest, JsonHasTheContractFields) {
  const nlohmann::json j = ToJson(SampleRun(0));
  EXPECT_EQ(j["tool"], "lockbench-client");
  EXPECT_TRUE(j["version"].is_string());
  const auto& c = j["config"];
  for (const char* key :
       {"n", "host", "port", "connect_port", "mode", "connection", "threads", "requests",
        "duration_s", "warmup_s", "rate", "read_ratio", "distribution", "seed"}) {
    EXPECT_TRUE(c.contains(key)) << key;
  }
  EXPECT_EQ(c["port"], 3000);
  EXPECT_EQ(c["connect_port"], 47115);
  EXPECT_EQ(c["mode"], "closed");
  EXPECT_EQ(c["connection"], "per-request");
  EXPECT_EQ(c["distribution"], "uniform");
  const auto& r = j["results"];
  for (const char* key : {"requests", "ok", "errors", "elapsed_s", "throughput_rps", "latency_us",
                          "uncorrected_latency_us", "target_rate", "saturated", "fairness"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  for (const char* key : {"total", "connect", "reset", "timeout", "error_reply", "short_reply",
                          "other", "long_reply"}) {
    EXPECT_TRUE(r["errors"][key].is_number_unsigned()) << key;
  }
  EXPECT_EQ(r["errors"]["total"], 10);
  EXPECT_EQ(r["errors"]["timeout"], 7);
  for (const char* key : {"mean", "min", "p50", "p90", "p95", "p99", "p999", "max"}) {
    EXPECT_TRUE(r["latency_us"][key].is_number()) << key;
  }
  EXPECT_NEAR(r["latency_us"]["p50"].get<double>(), 1500, 1500 / 256.0 + 1);
  EXPECT_DOUBLE_EQ(r["throughput_rps"].get<double>(), 495.0);
  EXPECT_TRUE(r["uncorrected_latency_us"].is_null());
  EXPECT_TRUE(r["target_rate"].is_null());
  EXPECT_EQ(r["saturated"], false);
  EXPECT_FALSE(r.contains("timeline"));
}

TEST(ReportTest, OpenLoopJsonAndSaturation) {
  RunReport run = SampleRun(400);  // achieved 500/s >= 400: not saturated
  run.with_timeline = true;
  nlohmann::json j = ToJson(run);
  EXPECT_EQ(j["config"]["mode"], "open");
  EXPECT_EQ(j["results"]["target_rate"], 400.0);
  EXPECT_FALSE(j["results"]["saturated"].get<bool>());
  EXPECT_NEAR(j["results"]["uncorrected_latency_us"]["p50"].get<double>(), 750, 4);
  ASSERT_EQ(j["results"]["timeline"].size(), 2u);
  EXPECT_EQ(j["results"]["timeline"][1]["ok"], 490);
  run.config.rate = 1000;  // achieved 500/s: saturated
  EXPECT_TRUE(ToJson(run)["results"]["saturated"].get<bool>());
  EXPECT_NE(ToText(run).find("SATURATED"), std::string::npos);
}

TEST(ReportTest, FairnessOverTheClientsOkCounts) {
  RunReport run = SampleRun(0);
  nlohmann::json f = ToJson(run)["results"]["fairness"];
  EXPECT_EQ(f["clients"], 4);
  // x = 250, 240, 250, 250: sum 990, sum of squares 245100, mean 247.5.
  EXPECT_NEAR(f["jain"].get<double>(), 990.0 * 990.0 / (4 * 245100.0), 1e-12);
  EXPECT_NEAR(f["rsd"].get<double>(), std::sqrt(245100.0 / 4 - 247.5 * 247.5) / 247.5, 1e-12);
  EXPECT_NEAR(f["max_min"].get<double>(), 250.0 / 240.0, 1e-12);

  run.result.client_ok = {7, 7, 7};
  f = ToJson(run)["results"]["fairness"];
  EXPECT_DOUBLE_EQ(f["jain"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(f["rsd"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(f["max_min"].get<double>(), 1.0);

  run.result.client_ok = {10, 0};  // one client did everything
  f = ToJson(run)["results"]["fairness"];
  EXPECT_DOUBLE_EQ(f["jain"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(f["rsd"].get<double>(), 1.0);
  EXPECT_TRUE(f["max_min"].is_null());

  run.result.client_ok.clear();
  f = ToJson(run)["results"]["fairness"];
  EXPECT_EQ(f["clients"], 0);
  for (const char* key : {"jain", "rsd", "max_min"}) EXPECT_TRUE(f[key].is_null()) << key;
}

TEST(ReportTest, CsvHasNoFairnessColumns) {
  EXPECT_EQ(CsvHeader().find("fairness"), std::string::npos);
  EXPECT_EQ(CsvHeader().find("jain"), std::string::npos);
}

TEST(ReportTest, CsvHeaderAndRowAgree) {
  const std::vector<std::string> header = SplitCsv(CsvHeader());
  for (double rate : {0.0, 400.0}) {
    const std::vector<std::string> row = SplitCsv(CsvRow(SampleRun(rate)));
    ASSERT_EQ(header.size(), row.size()) << CsvRow(SampleRun(rate));
    auto cell = [&](const std::string& name) {
      for (std::size_t i = 0; i < header.size(); ++i) {
        if (header[i] == name) return row[i];
      }
      ADD_FAILURE() << "no column " << name;
      return std::string();
    };
    EXPECT_EQ(cell("tool"), "lockbench-client");
    EXPECT_EQ(cell("threads"), "4");
    EXPECT_EQ(cell("ok"), "990");
    EXPECT_EQ(cell("errors_timeout"), "7");
    EXPECT_EQ(cell("mode"), rate > 0 ? "open" : "closed");
    EXPECT_EQ(cell("rate"), rate > 0 ? "400.0" : "");
    EXPECT_EQ(cell("saturated"), "false");
    EXPECT_FALSE(cell("latency_us_p99").empty());
    EXPECT_EQ(cell("uncorrected_latency_us_p99").empty(), rate == 0);
  }
}

TEST(ReportTest, TextMentionsTheKitPort) {
  const std::string text = ToText(SampleRun(0));
  EXPECT_NE(text.find("127.0.0.1:47115"), std::string::npos) << text;
  EXPECT_NE(text.find("port 3000 byte-swapped"), std::string::npos) << text;
  EXPECT_NE(text.find("timeout 7"), std::string::npos) << text;
}

}  // namespace
}  // namespace kv
