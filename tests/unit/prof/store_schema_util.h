#pragma once
// Test helper: turns a store written by this portkit back into the shape of an older schema's
// events table (for the migration tests in store_test.cc and timeline_test.cc).

namespace portkit::prof::testing {

/// SQL that removes schema 4's `traces.base_ns` and schema 3's `events.launch` and puts back schema
/// 1/2's kernel_launches view, which found a task's launch through the correlation ids.
inline constexpr const char* kUndoSchemaThreeLaunch =
    "ALTER TABLE traces DROP COLUMN base_ns; DROP VIEW kernel_launches; ALTER TABLE events DROP COLUMN launch; "
    "CREATE VIEW kernel_launches AS SELECT k.trace, k.rowid AS kernel, r.rowid AS launch, "
    "r.parent AS cpu_op FROM events k LEFT JOIN events r ON r.trace = k.trace AND "
    "r.correlation = k.correlation AND r.kind IN ('runtime', 'driver') "
    "WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset'); ";

}  // namespace portkit::prof::testing
