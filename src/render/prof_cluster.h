#pragma once
/// Renderers of `prof cluster`'s report (src/prof/cluster/cluster.h): a text summary, the whole
/// report as JSON and HTML, and msprof-analyze's files (cluster_step_trace_time.csv,
/// cluster_communication.json, cluster_communication_matrix.json). Times in JSON are numbers in
/// microseconds (3 decimals) unless the key says otherwise; output is deterministic.
#include <string>

#include "prof/cluster/cluster.h"

namespace portkit::render {

std::string ProfClusterText(const prof::cluster::ClusterReport& r);
std::string ProfClusterJson(const prof::cluster::ClusterReport& r);
std::string ProfClusterHtml(const prof::cluster::ClusterReport& r);
/// msprof-analyze's columns (Step, Type, Index, Computing, ..., Preparing), then Memory and Idle.
std::string ClusterStepTraceCsv(const prof::cluster::ClusterReport& r);
std::string ClusterCommunicationJson(const prof::cluster::ClusterReport& r);
std::string ClusterCommunicationMatrixJson(const prof::cluster::ClusterReport& r);

}  // namespace portkit::render
