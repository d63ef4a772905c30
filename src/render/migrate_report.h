#pragma once
/// The files of `portkit migrate`, rendered from a MigrateReport: the change list
/// (change_list.csv, change_list.json), the `files | statistics` table and the run log
/// migration_log.txt. The migrated copy and migration.patch are written by RunMigrate itself.
#include <string>
#include <vector>

#include "analyse/api.h"
#include "core/log.h"
#include "core/status.h"

namespace portkit::render {

/// change_list.csv: `File,Start Line,End Line,Operation Type,Message`, one row per edit.
std::string ChangeListCsv(const analyse::MigrateReport& report);
/// change_list.json: the run (target, unsafe), counts, every change and every warning.
std::string ChangeListJson(const analyse::MigrateReport& report);
/// The `files | statistics` table: the change list files written, then files changed and copied.
std::string MigrateSummaryTable(const analyse::MigrateReport& report, const std::vector<std::string>& written);

/// `migrate --dry-run`: per edit class, the edits that would be made and the files they touch;
/// then the edits listed for review (not made) and the warnings.
std::string MigrateDryRunTable(const analyse::MigrateReport& report);

/// Writes the change lists of `formats` ("csv", "json") and migration_log.txt (the log so far and
/// the table) into the report's reports folder beside the copy, atomically. Returns the table for the console.
/// Every file is attempted; the first write error is returned.
Expected<std::string> WriteMigrateReports(const analyse::MigrateReport& report, const std::vector<std::string>& formats,
                                          Logger& log);

}  // namespace portkit::render
