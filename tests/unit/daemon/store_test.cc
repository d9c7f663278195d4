#include "store/store.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "status_assertions.h"

namespace ktesio::daemon::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/kt-store-XXXXXX";
    dir_ = mkdtemp(templ);
    path_ = dir_ + "/state.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  InstanceRow Row(const std::string& name) {
    InstanceRow row;
    row.name = name;
    row.kind = "mock";
    row.snapshot = std::string("\x01\x00\x02", 3);
    row.state = "registered";
    row.state_since_ms = 10;
    row.registered_at_ms = 10;
    row.home = "/h/" + name;
    return row;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(StoreTest, FreshStoreIsAtCurrentSchema) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  KT_ASSERT_OK(store.status());
  absl::StatusOr<int> version = (*store)->SchemaVersion();
  KT_ASSERT_OK(version.status());
  EXPECT_EQ(*version, kSchemaVersion);
}

TEST_F(StoreTest, InsertFindListUpdateDelete) {
  auto store = std::move(Store::Open(path_)).value();
  InstanceRow b = Row("b");
  InstanceRow a = Row("a");
  KT_ASSERT_OK(store->InsertInstance(b));
  KT_ASSERT_OK(store->InsertInstance(a));
  EXPECT_GT(a.id, b.id);
  auto found = store->FindInstance("b");
  KT_ASSERT_OK(found.status());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->snapshot, std::string("\x01\x00\x02", 3));  // blobs keep NULs
  EXPECT_FALSE((*found)->pid.has_value());
  auto rows = store->ListInstances();
  KT_ASSERT_OK(rows.status());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].name, "a");
  EXPECT_EQ((*rows)[1].name, "b");

  InstanceRow changed = **found;
  changed.state = "running";
  changed.pid = 1234;
  changed.restart_count = 2;
  changed.restarts_total = 7;
  KT_ASSERT_OK(store->UpdateInstance(changed));
  auto again = store->FindInstance("b");
  EXPECT_EQ((*again)->state, "running");
  EXPECT_EQ((*again)->pid, 1234);
  EXPECT_EQ((*again)->restart_count, 2);
  EXPECT_EQ((*again)->restarts_total, 7);

  KT_ASSERT_OK(store->DeleteInstance(changed.id));
  EXPECT_FALSE(store->FindInstance("b")->has_value());
}

TEST_F(StoreTest, DuplicateNameIsAlreadyExists) {
  auto store = std::move(Store::Open(path_)).value();
  InstanceRow first = Row("dup");
  InstanceRow second = Row("dup");
  KT_ASSERT_OK(store->InsertInstance(first));
  absl::Status status = store->InsertInstance(second);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(StoreTest, DataSurvivesReopen) {
  {
    auto store = std::move(Store::Open(path_)).value();
    InstanceRow row = Row("kept");
    KT_ASSERT_OK(store->InsertInstance(row));
  }
  auto store = std::move(Store::Open(path_)).value();
  EXPECT_TRUE(store->FindInstance("kept")->has_value());
}

TEST_F(StoreTest, NewerSchemaIsRefusedNamingBothVersions) {
  {
    auto store = std::move(Store::Open(path_)).value();
    KT_ASSERT_OK(store->db().Exec("PRAGMA user_version=99"));
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(store.status().message());
  EXPECT_NE(message.find("99"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(kSchemaVersion)), std::string::npos) << message;
}

TEST_F(StoreTest, EventCursorsIncreaseAndFilter) {
  auto store = std::move(Store::Open(path_)).value();
  auto c1 = store->AppendEvent({0, 1, "a", "transition", "{}"});
  auto c2 = store->AppendEvent({0, 2, "b", "transition", "{}"});
  auto c3 = store->AppendEvent({0, 3, "a", "transition", "{\"x\":1}"});
  KT_ASSERT_OK(c3.status());
  EXPECT_LT(*c1, *c2);
  EXPECT_LT(*c2, *c3);
  auto all = store->ReadEvents(0, "", 100);
  ASSERT_EQ(all->size(), 3u);
  auto only_a = store->ReadEvents(0, "a", 100);
  ASSERT_EQ(only_a->size(), 2u);
  EXPECT_EQ((*only_a)[1].payload_json, "{\"x\":1}");
  auto after = store->ReadEvents(*c2, "", 100);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].cursor, *c3);
}

TEST_F(StoreTest, AuditTrailIsALogOfItsOwn) {
  auto store = std::move(Store::Open(path_)).value();
  auto e1 = store->AppendEvent({0, 1, "a", "transition", "{}"});
  auto a1 = store->AppendEvent({0, 2, "a", "audit", "{\"rpc\":\"StartAgent\"}"}, EventLog::kAudit);
  auto a2 = store->AppendEvent({0, 3, "", "audit", "{\"rpc\":\"SetSecret\"}"}, EventLog::kAudit);
  auto e2 = store->AppendEvent({0, 4, "a", "transition", "{}"});
  KT_ASSERT_OK(e2.status());
  KT_ASSERT_OK(a2.status());
  // The event stream's cursors stay contiguous; the audit trail counts on its own.
  EXPECT_EQ(*e2, *e1 + 1);
  EXPECT_EQ(*a2, *a1 + 1);
  EXPECT_EQ(*store->LastCursor(), *e2);
  EXPECT_EQ(*store->LastCursor(EventLog::kAudit), *a2);
  auto events = store->ReadEvents(0, "", 100);
  ASSERT_EQ(events->size(), 2u);
  for (const EventRow& row : *events) EXPECT_EQ(row.type, "transition");
  auto audit_a = store->ReadEvents(0, "a", 100, EventLog::kAudit);
  ASSERT_EQ(audit_a->size(), 1u);
  EXPECT_EQ((*audit_a)[0].payload_json, "{\"rpc\":\"StartAgent\"}");
}

TEST_F(StoreTest, TransactionRollsBackOnError) {
  auto store = std::move(Store::Open(path_)).value();
  absl::Status status = store->InTransaction([&]() -> absl::Status {
    InstanceRow row = Row("ghost");
    KT_EXPECT_OK(store->InsertInstance(row));
    return absl::InternalError("boom");
  });
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(store->FindInstance("ghost")->has_value());
}

TEST_F(StoreTest, UnopenablePathIsStoreError) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_ + "/missing/dir/state.db");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(contract::ErrorReason(store.status()), "STORE_ERROR");
}

}  // namespace
}  // namespace ktesio::daemon::store
