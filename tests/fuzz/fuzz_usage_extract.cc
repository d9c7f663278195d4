// Fuzzes the metering proxy's parsers: the JSON reader, request planning (include_usage
// injection must always yield valid JSON) and the response meter over SSE and JSON bodies fed in
// arbitrary splits. Invariants: no crash; the shallow parse agrees with the full one, and the
// scanner that validates a body as it arrives agrees with the shallow parse, as a plan made so
// agrees with the whole body's; without stripping, the forwarded bytes equal the input exactly;
// with stripping, the output is never longer than the input.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "ktesio/contract/json.h"
#include "metering/usage_extract.h"

using ktesio::fuzz::AsText;
using ktesio::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ktesio::daemon::metering;
  if (size < 2) {
    return 0;
  }
  const std::string_view control = AsText(data, 2);
  const std::string_view input = AsText(data + 2, size - 2);
  const std::optional<json::Value> value = json::Parse(input);
  if (value.has_value()) {
    Check(value->begin <= value->end && value->end <= input.size());
  }
  // The shallow parse (request planning) accepts exactly what the full one does, with the same
  // top-level spans.
  const std::optional<json::Value> shallow = json::ParseShallow(input);
  Check(shallow.has_value() == value.has_value());
  if (shallow.has_value()) {
    Check(shallow->kind == value->kind && shallow->end == value->end);
    Check(shallow->members.size() == value->members.size() &&
          shallow->items.size() == value->items.size());
    for (size_t i = 0; i < shallow->members.size(); ++i) {
      const json::Value& a = shallow->members[i].value;
      const json::Value& b = value->members[i].value;
      Check(shallow->members[i].key == value->members[i].key && a.kind == b.kind &&
            a.begin == b.begin && a.end == b.end);
    }
  }
  const size_t step = 1 + static_cast<unsigned char>(control[1]) % 64;
  // The scanner that validates a body as it arrives, fed in pieces, agrees with the shallow parse.
  json::ShallowScanner scanner;
  for (size_t at = step; at < input.size(); at += step) {
    scanner.Advance(input.substr(0, at));
  }
  const std::optional<json::Value> scanned = scanner.Finish(input);
  Check(scanned.has_value() == shallow.has_value());
  if (scanned.has_value()) {
    Check(scanned->kind == shallow->kind && scanned->begin == shallow->begin &&
          scanned->end == shallow->end && scanned->members.size() == shallow->members.size());
    for (size_t i = 0; i < scanned->members.size(); ++i) {
      const json::Value& a = scanned->members[i].value;
      const json::Value& b = shallow->members[i].value;
      Check(scanned->members[i].key == shallow->members[i].key && a.kind == b.kind &&
            a.begin == b.begin && a.end == b.end && a.text == b.text && a.boolean == b.boolean);
    }
  }
  const RequestPlan plan = PlanRequest("POST", "/v1/chat/completions", input);
  if (plan.edit.has_value()) {
    Check(plan.edit->begin <= plan.edit->end && plan.edit->end <= input.size());
    Check(json::Parse(plan.edit->Apply(input)).has_value());
  }
  // Planned as the body arrives: the same plan.
  RequestPlanner planner("POST", "/v1/chat/completions");
  for (size_t at = step; at < input.size(); at += step) {
    planner.Arrived(input.substr(0, at));
  }
  const RequestPlan arrived = planner.Finish(input);
  Check(arrived.streaming == plan.streaming && arrived.model == plan.model &&
        arrived.edit.has_value() == plan.edit.has_value());
  if (plan.edit.has_value()) {
    Check(arrived.edit->Apply(input) == plan.edit->Apply(input));
  }
  const bool strip = (control[0] & 1) != 0;
  const bool sse = (control[0] & 2) != 0;
  ResponseMeter meter(static_cast<ApiShape>((control[0] >> 2) % 4), strip);
  meter.Begin(200, sse ? "text/event-stream" : "application/json");
  std::string forwarded;
  for (size_t at = 0; at < input.size(); at += step) {
    meter.Feed(input.substr(at, step), forwarded);
  }
  meter.Finish((control[0] & 64) != 0, forwarded);
  if (!strip || !sse) {
    Check(forwarded == input);
  } else {
    Check(forwarded.size() <= input.size());
  }
  if (meter.outcome() == ResponseMeter::Outcome::kKnown) {
    Check(meter.usage().input <= static_cast<uint64_t>(INT64_MAX));
    Check(meter.usage().output <= static_cast<uint64_t>(INT64_MAX));
  }
  return 0;
}
