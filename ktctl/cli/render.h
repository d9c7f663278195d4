#pragma once

// Rendering API messages as the frozen JSON documents (product.md §3, docs/json.md) and as
// human tables. Key sets are frozen: add keys only, never rename or remove.

#include <string>
#include <string_view>
#include <vector>

#include "ktesio/contract/json_writer.h"
#include "ktesio/v1/agent.pb.h"
#include "ktesio/v1/system.pb.h"

namespace ktesio::cli {

std::string StateName(v1::AgentState state);
std::string LevelName(v1::SupportLevel level);
std::string RestartPolicyName(v1::RestartPolicy policy);
std::string BreachActionName(v1::BreachAction action);
std::string MeteringSourceName(v1::MeteringSource source);

void WriteUsageView(contract::JsonWriter& json, const v1::UsageView& usage);
void WriteBudgetView(contract::JsonWriter& json, const v1::BudgetView& budget);
void WriteFleetTotals(contract::JsonWriter& json, const v1::FleetTotals& totals);
void WriteFleetEntry(contract::JsonWriter& json, const v1::AgentInstance& instance);

// `agent list` options: labels shown as a column (--show-labels) and one column per key (-L).
struct ListOptions {
  bool show_labels = false;
  std::vector<std::string> label_columns;
};

// {"schema_version":2,"totals":...,"instances":[...]}; with --show-labels or -L every entry
// also has "labels": {key: value} (the default key set is unchanged).
std::string ListDocument(const v1::ListAgentsResponse& response, const ListOptions& options = {});
// {"k":"v",...} of an instance's labels.
void WriteLabels(contract::JsonWriter& json, const v1::AgentInstance& instance);
// "k=v,k2=v2" ("<none>" when there are none).
std::string LabelsText(const v1::AgentInstance& instance);
// {"schema_version":2,"instance":FleetEntry}
std::string ShowDocument(const v1::AgentInstance& instance);
// `agent stop --all --json`: {"schema_version":2,"instances":[...],"notices":[...]}.
std::string StopAllDocument(const v1::StopAllAgentsResponse& response);
// {"schema_version":1,"daemon_version",...}
std::string StatusDocument(const v1::GetStatusResponse& status);

std::string ListTable(const v1::ListAgentsResponse& response, const ListOptions& options = {});
std::string ShowText(const v1::AgentInstance& instance);
std::string StatusText(const v1::GetStatusResponse& status);
// The per-OS capability table of a declaration, with the current OS marked.
std::string CapabilityTable(const v1::AgentInstance& instance);

// Free text (an `agent.*` config value) fit for one line of a terminal: each control byte
// (below 0x20, and DEL) as an escape — \n, \r, \t, \xHH — and so each byte of a C1 control
// (U+0080..U+009F) and each byte that is not UTF-8, so a value cannot move the cursor, recolour
// the screen or split its line. Other UTF-8 text is kept as is.
std::string TerminalText(std::string_view text);

// "$X.XX (estimated)" from micro-dollars.
std::string FormatDollars(int64_t micros);
// The same amount without the label: "$1.25".
std::string FormatCents(int64_t micros);

}  // namespace ktesio::cli
