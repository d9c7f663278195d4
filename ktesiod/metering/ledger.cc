#include "metering/ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"

namespace ktesio::daemon::metering {
namespace {

constexpr const char* kInsertLedger =
    "INSERT INTO usage_events (instance_id, run, sequence, input_tokens, output_tokens, source, "
    "at_ms, cost_micros)";

}  // namespace

LedgerWriter::UsageFragments LedgerWriter::UsageDocument(std::string_view instance, int64_t run,
                                                         std::string_view source,
                                                         std::string_view at) {
  // {"schema_version":1,"instance":…,"run_id":…,"input_tokens":…,"output_tokens":…,
  //  "metering_source":…,"sequence":…,"occurred_at":…}, as contract::JsonWriter writes it.
  UsageFragments doc;
  doc.head = "{\"schema_version\":1,\"instance\":\"";
  contract::AppendJsonEscaped(doc.head, instance);
  absl::StrAppend(&doc.head, "\",\"run_id\":", run, ",\"input_tokens\":");
  doc.output = ",\"output_tokens\":";
  doc.source = ",\"metering_source\":\"";
  contract::AppendJsonEscaped(doc.source, source);
  doc.source += "\",\"sequence\":";
  doc.tail = ",\"occurred_at\":\"";
  contract::AppendJsonEscaped(doc.tail, at);
  doc.tail += "\"}";
  return doc;
}

absl::StatusOr<LedgerWriter> LedgerWriter::Begin(store::Store& store, const store::InstanceRow& row,
                                                 int64_t run, std::string source,
                                                 const budget::Limits& limits, int64_t now_ms) {
  LedgerWriter writer;
  writer.store_ = &store;
  writer.row_ = row;
  writer.run_ = run;
  writer.source_ = std::move(source);
  writer.limits_ = limits;
  writer.now_ms_ = now_ms;
  writer.at_ = logs::FormatLogTime(now_ms);
  writer.usage_doc_ = UsageDocument(row.name, run, writer.source_, writer.at_);
  // Totals and fired dimensions as of this transaction: budgets see every earlier event.
  KT_ASSIGN_OR_RETURN(store::Store::UsageTotals before, store.Usage(row.id, run));
  writer.totals_.run_tokens = before.run_input + before.run_output;
  writer.totals_.cumulative_tokens = before.cumulative_input + before.cumulative_output;
  if (limits.rate.has_value()) {
    writer.totals_.run_dollars = before.run_micros;
    writer.totals_.cumulative_dollars = before.cumulative_micros;
  }
  KT_ASSIGN_OR_RETURN(
      store::Statement fired,
      store.db().Prepare(
          "SELECT scope, dimension FROM breaches WHERE instance_id = ?1 AND run = ?2"));
  fired.Bind(1, row.id).Bind(2, run);
  while (true) {
    KT_ASSIGN_OR_RETURN(bool next, fired.Step());
    if (!next) {
      break;
    }
    writer.fired_.insert(
        {fired.ColumnText(0) == "run" ? budget::Scope::kRun : budget::Scope::kCumulative,
         fired.ColumnText(1) == "tokens" ? budget::Dimension::kTokens
                                         : budget::Dimension::kDollars});
  }
  struct {
    store::Statement* into;
    const char* sql;
  } statements[] = {
      {&writer.insert_,
       "INSERT OR IGNORE INTO usage_events (instance_id, run, sequence, input_tokens, "
       "output_tokens, source, at_ms, cost_micros) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
      {&writer.breach_,
       "INSERT OR IGNORE INTO breaches (instance_id, run, scope, dimension, limit_value, "
       "observed, action, at_ms, pending) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
      {&writer.breach_event_,
       "INSERT INTO events (at_ms, instance, type, payload) VALUES (?1, ?2, 'budget_breach', "
       "?3)"},
      {&writer.unknown_,
       "INSERT OR IGNORE INTO unknown_usage (instance_id, run, sequence, source, api, at_ms) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
  };
  for (const auto& statement : statements) {
    KT_ASSIGN_OR_RETURN(store::Statement prepared, store.db().Prepare(statement.sql));
    *statement.into = std::move(prepared);
  }
  // Rows above the run's highest sequence are new for certain: plain inserts, kRowsPerInsert
  // rows per statement (a conflict there would be a bug, and fails the transaction).
  std::string many = std::string(kInsertLedger) + " VALUES ";
  for (size_t i = 0; i < kRowsPerInsert; ++i) {
    const int p = static_cast<int>(i) * 8;
    absl::StrAppend(&many, i == 0 ? "" : ", ", "(?", p + 1, ", ?", p + 2, ", ?", p + 3, ", ?",
                    p + 4, ", ?", p + 5, ", ?", p + 6, ", ?", p + 7, ", ?", p + 8, ")");
  }
  KT_ASSIGN_OR_RETURN(writer.insert_many_, store.db().Prepare(many));
  KT_ASSIGN_OR_RETURN(
      writer.insert_new_,
      store.db().Prepare(absl::StrCat(kInsertLedger, " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")));
  KT_ASSIGN_OR_RETURN(
      store::Statement highest,
      store.db().Prepare("SELECT MAX(sequence) FROM usage_events WHERE instance_id = ?1 AND "
                         "run = ?2"));
  highest.Bind(1, row.id).Bind(2, run);
  KT_RETURN_IF_ERROR(highest.Step().status());
  writer.highest_ = highest.ColumnOptionalInt(0).value_or(-1);
  return writer;
}

absl::StatusOr<bool> LedgerWriter::Add(uint64_t sequence, uint64_t input_tokens,
                                       uint64_t output_tokens) {
  std::optional<int64_t> cost;
  if (limits_.rate.has_value()) {
    cost = budget::PriceEvent(input_tokens, output_tokens, *limits_.rate);
  }
  const Row ledger_row{static_cast<int64_t>(sequence), static_cast<int64_t>(input_tokens),
                       static_cast<int64_t>(output_tokens), cost};
  if (ledger_row.sequence > highest_) {
    // Above every sequence of the run: new for certain, written with the next rows at once.
    highest_ = ledger_row.sequence;
    unwritten_.push_back(ledger_row);
    if (unwritten_.size() == kRowsPerInsert) {
      KT_RETURN_IF_ERROR(WriteRows());
    }
  } else {
    // Possibly a replay: the key decides, against every row written so far.
    KT_RETURN_IF_ERROR(WriteRows());
    insert_.Reset();
    BindRow(insert_, 0, ledger_row);
    KT_RETURN_IF_ERROR(insert_.Run());
    if (sqlite3_changes(store_->db().raw()) == 0) {
      return false;
    }
  }
  // The usage_update document, from the fragments Begin escaped once (UsageDocument).
  if (pending_events_ > 0) {
    pending_payloads_ += '\n';
  }
  absl::StrAppend(&pending_payloads_, usage_doc_.head, input_tokens, usage_doc_.output,
                  output_tokens, usage_doc_.source, sequence, usage_doc_.tail);
  ++pending_events_;
  if (pending_events_ == kMaxSpan) {
    KT_RETURN_IF_ERROR(FlushEvents());
  }
  delta_.input = budget::SaturatingAdd(delta_.input, input_tokens);
  delta_.output = budget::SaturatingAdd(delta_.output, output_tokens);
  if (cost.has_value()) {
    delta_.micros = budget::SaturatingAdd(delta_.micros, *cost);
    ++delta_.priced;
  } else {
    ++delta_.unpriced;
  }
  const uint64_t tokens = budget::SaturatingAdd(input_tokens, output_tokens);
  totals_.run_tokens = budget::SaturatingAdd(totals_.run_tokens, tokens);
  totals_.cumulative_tokens = budget::SaturatingAdd(totals_.cumulative_tokens, tokens);
  if (cost.has_value()) {
    totals_.run_dollars = budget::SaturatingAdd(*totals_.run_dollars, *cost);
    totals_.cumulative_dollars = budget::SaturatingAdd(*totals_.cumulative_dollars, *cost);
  }
  KT_RETURN_IF_ERROR(RecordBreaches());
  return true;
}

absl::StatusOr<bool> LedgerWriter::AddUnknown(uint64_t sequence, std::string_view api) {
  unknown_.Reset();
  unknown_.Bind(1, row_.id).Bind(2, run_).Bind(3, static_cast<int64_t>(sequence));
  unknown_.Bind(4, source_).Bind(5, api).Bind(6, now_ms_);
  KT_RETURN_IF_ERROR(unknown_.Run());
  if (sqlite3_changes(store_->db().raw()) == 0) {
    return false;
  }
  ++delta_.unknown;
  return true;
}

void LedgerWriter::BindRow(store::Statement& statement, int first, const Row& row) const {
  statement.Bind(first + 1, row_.id).Bind(first + 2, run_).Bind(first + 3, row.sequence);
  statement.Bind(first + 4, row.input).Bind(first + 5, row.output);
  // source_ is not touched while the statement runs (Add and WriteRows bind and run at once).
  statement.BindStatic(first + 6, source_).Bind(first + 7, now_ms_).Bind(first + 8, row.cost);
}

absl::Status LedgerWriter::WriteRows() {
  if (unwritten_.size() == kRowsPerInsert) {
    insert_many_.Reset();
    for (size_t i = 0; i < unwritten_.size(); ++i) {
      BindRow(insert_many_, static_cast<int>(i) * 8, unwritten_[i]);
    }
    KT_RETURN_IF_ERROR(insert_many_.Run());
  } else {
    for (const Row& row : unwritten_) {
      insert_new_.Reset();
      BindRow(insert_new_, 0, row);
      KT_RETURN_IF_ERROR(insert_new_.Run());
    }
  }
  unwritten_.clear();
  return absl::OkStatus();
}

absl::Status LedgerWriter::FlushEvents() {
  if (pending_events_ == 0) {
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> cursor = store_->AppendEventSpan(now_ms_, row_.name, "usage_update",
                                                           pending_payloads_, pending_events_);
  if (!cursor.ok()) {
    return cursor.status();
  }
  pending_payloads_.clear();
  pending_events_ = 0;
  return absl::OkStatus();
}

absl::Status LedgerWriter::Finish() {
  KT_RETURN_IF_ERROR(WriteRows());
  KT_RETURN_IF_ERROR(FlushEvents());
  if (delta_.input == 0 && delta_.output == 0 && delta_.priced == 0 && delta_.unpriced == 0 &&
      delta_.unknown == 0) {
    return absl::OkStatus();
  }
  absl::StatusOr<store::Statement> upsert = store_->db().Prepare(
      "INSERT INTO usage_totals (instance_id, run, input_tokens, output_tokens, cost_micros, "
      "priced_events, unpriced_events, unknown_calls) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
      "ON CONFLICT (instance_id, run) DO UPDATE SET "
      // Saturating at 2^63 - 1, as budgets do: an overflow must never wedge ingestion.
      "input_tokens = CASE WHEN input_tokens > 9223372036854775807 - excluded.input_tokens "
      "THEN 9223372036854775807 ELSE input_tokens + excluded.input_tokens END, "
      "output_tokens = CASE WHEN output_tokens > 9223372036854775807 - excluded.output_tokens "
      "THEN 9223372036854775807 ELSE output_tokens + excluded.output_tokens END, "
      "cost_micros = CASE WHEN cost_micros > 9223372036854775807 - excluded.cost_micros "
      "THEN 9223372036854775807 ELSE cost_micros + excluded.cost_micros END, "
      "priced_events = priced_events + excluded.priced_events, "
      "unpriced_events = unpriced_events + excluded.unpriced_events, "
      "unknown_calls = unknown_calls + excluded.unknown_calls");
  if (!upsert.ok()) {
    return upsert.status();
  }
  upsert->Bind(1, row_.id).Bind(2, run_);
  constexpr uint64_t kMax = static_cast<uint64_t>(INT64_MAX);
  upsert->Bind(3, static_cast<int64_t>(std::min(delta_.input, kMax)));
  upsert->Bind(4, static_cast<int64_t>(std::min(delta_.output, kMax)));
  upsert->Bind(5, delta_.micros).Bind(6, static_cast<int64_t>(delta_.priced));
  upsert->Bind(7, static_cast<int64_t>(delta_.unpriced));
  upsert->Bind(8, static_cast<int64_t>(delta_.unknown));
  delta_ = Delta{};
  return upsert->Run();
}

absl::Status LedgerWriter::RecordBreaches() {
  for (const budget::Breach& crossed : budget::Evaluate(limits_, totals_, fired_)) {
    // The usage_update events up to the crossing one come before its budget_breach event.
    KT_RETURN_IF_ERROR(FlushEvents());
    fired_.insert({crossed.scope, crossed.dimension});
    breach_.Reset();
    breach_.Bind(1, row_.id).Bind(2, run_).Bind(3, budget::ScopeName(crossed.scope));
    breach_.Bind(4, budget::DimensionName(crossed.dimension)).Bind(5, crossed.limit);
    breach_.Bind(6, crossed.observed).Bind(7, budget::ActionName(limits_.action));
    breach_.Bind(8, now_ms_);
    // A pause or stop is pending until the instance leaves running for this run (the engine
    // clears it then); a daemon that crashes first acts on it at its next start.
    breach_.Bind(9, static_cast<int64_t>(limits_.action != budget::Action::kWarn ? 1 : 0));
    KT_RETURN_IF_ERROR(breach_.Run());
    contract::JsonWriter payload;
    payload.BeginObject().Key("schema_version").Int(1).Key("instance").String(row_.name);
    payload.Key("run_id").Int(run_).Key("scope").String(budget::ScopeName(crossed.scope));
    payload.Key("dimension").String(budget::DimensionName(crossed.dimension));
    payload.Key("limit").Int(crossed.limit).Key("observed").Int(crossed.observed);
    payload.Key("action").String(budget::ActionName(limits_.action));
    payload.Key("metering_source").String(source_);
    payload.Key("at").String(at_).EndObject();
    breach_event_.Reset();
    breach_event_.Bind(1, now_ms_).Bind(2, row_.name).Bind(3, payload.str());
    KT_RETURN_IF_ERROR(breach_event_.Run());
    breaches_.push_back(crossed);
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::metering
