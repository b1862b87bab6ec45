// The I/O model table: names unique, the default first, every built-in row
// builds a model that serves and drains, and --help's line names them all.
#include "common/io_registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "common/store_mutex_per_slot.h"

namespace kv {
namespace {

TEST(IoRegistryTest, TheLabsModelIsTheDefaultAndFirst) {
  ASSERT_FALSE(AllIoModels().empty());
  EXPECT_EQ(&AllIoModels()[0], &DefaultIoModel());
  EXPECT_EQ(DefaultIoModel().name, "thread");
  EXPECT_TRUE(DefaultIoModel().built());
  EXPECT_EQ(DefaultIoModel().probe, nullptr);
}

TEST(IoRegistryTest, NamesAreUniqueAndFoundAgain) {
  std::set<std::string_view> names;
  for (const IoModelInfo& m : AllIoModels()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_EQ(FindIoModel(m.name), &m);
    EXPECT_FALSE(m.description.empty()) << m.name;
  }
  EXPECT_EQ(FindIoModel("fibers"), nullptr);
}

TEST(IoRegistryTest, EveryBuiltModelIsMadeAndDrains) {
  ArtificialDelay delay{std::chrono::microseconds(0)};
  MutexPerSlotStore store{4, &delay};
  RequestCounters counters;
  RequestHandler handler(&store, nullptr, &counters);
  for (const IoModelInfo& m : AllIoModels()) {
    SCOPED_TRACE(std::string(m.name));
    // A model left out of the build says why and has no factory.
    EXPECT_EQ(m.built(), m.create != nullptr);
    if (!m.built()) continue;
    if (m.probe != nullptr && !m.probe().ok()) continue;  // the kernel refuses it here
    std::unique_ptr<IoModel> model = m.create(IoModelConfig{}, &handler, ConnectionLimits());
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->open_connections(), 0u);
    EXPECT_EQ(model->Drain(0), 0u);
  }
}

TEST(IoRegistryTest, HelpNamesEveryModelWithItsDescription) {
  const std::string help = DescribeIoModels();
  EXPECT_EQ(help.rfind("I/O model: thread (", 0), 0u) << help;
  for (const IoModelInfo& m : AllIoModels()) {
    EXPECT_NE(help.find(std::string(m.name) + " (" + std::string(m.description) + ")"),
              std::string::npos)
        << help;
  }
}

}  // namespace
}  // namespace kv
