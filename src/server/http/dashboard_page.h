// The dashboard page served at GET /dashboard (assets/dashboard.html, compiled in by CMake through
// dashboard_page.cpp.in): one HTML document with its CSS and JavaScript inline (no CDN; the
// charts use Debian's Chart.js, served by preface at /dashboard/chart.js). Data from GET /v1/cache/stats (see
// server/http/http_dashboard.cpp for who sees what and how the page authenticates).
//
// Test hooks: once a poll has rendered, <body> carries data-ready="1", data-points (history samples drawn),
// data-charts (charts drawn with at least one point), data-chart-points (points over all charts), data-prefixes
// (prefix-tree nodes shown) and data-error (the last failure, "" when none).
#pragma once
#include <string_view>

namespace preface::server {

extern const std::string_view kDashboardHtml;

}  // namespace preface::server
