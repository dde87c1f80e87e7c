#include "validate/validate.h"

#include <sstream>

#include "core/markup.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "validate/checks.h"

namespace kiln::validate {

Expected<Report> validate_wheel(const std::filesystem::path& path, const Options& options) {
  KILN_TRY(LoadedWheel w, load_wheel(path));
  Report r;
  r.wheel = path;
  r.checks.push_back(check_archive(w));
  r.checks.push_back(check_metadata(w, options));
  r.checks.push_back(check_tags(w));
  r.checks.push_back(check_elf(w));
  r.checks.push_back(check_torch_abi(w, options));
  for (auto& c : check_gpu_code(w, options)) r.checks.push_back(std::move(c));
  r.checks.push_back(check_imports(w));
  if (!options.import_with.empty()) r.checks.push_back(check_import(w, options));
  return r;
}

std::string render_text(const Report& report, bool verbose) {
  std::ostringstream out;
  // Every field may quote the wheel's own bytes: shown one line each, no control character.
  auto field = [](std::string_view text) { return terminal_field(text, 4096); };
  out << field(report.wheel.filename().string()) << ": " << (report.ok() ? "ok" : "FAILED") << "\n";
  std::size_t width = 0;
  for (const auto& c : report.checks) width = std::max(width, c.id.size());
  for (const auto& c : report.checks) {
    out << "  " << verdict_name(c.verdict) << "  " << c.id << std::string(width - c.id.size(), ' ')
        << "  " << field(c.message) << "\n";
    if (verbose || c.verdict == Verdict::Fail)
      for (const auto& d : c.details)
        if (d != cat(verdict_name(c.verdict), ": ", c.message))  // the message already said it
          out << "        " << std::string(width, ' ') << field(d) << "\n";
  }
  return out.str();
}

nlohmann::json render_json(const std::vector<Report>& reports) {
  nlohmann::json wheels = nlohmann::json::array();
  bool ok = true;
  for (const auto& r : reports) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : r.checks)
      checks.push_back({{"id", c.id},
                        {"verdict", verdict_name(c.verdict)},
                        {"message", c.message},
                        {"details", c.details},
                        {"data", c.data}});
    nlohmann::json w = {{"wheel", r.wheel.string()}, {"ok", r.ok()}, {"checks", std::move(checks)}};
    if (const CheckResult* g = r.find("gpu-code"); g && g->data.contains("sass"))
      w["archs"] = {{"sass", g->data["sass"]}, {"ptx", g->data["ptx"]}};
    ok = ok && r.ok();
    wheels.push_back(std::move(w));
  }
  return {{"ok", ok}, {"wheels", std::move(wheels)}};
}

std::string render_junit(const std::vector<Report>& reports) {
  std::size_t tests = 0, failures = 0, skips = 0;
  for (const auto& r : reports)
    for (const auto& c : r.checks) {
      ++tests;
      failures += c.verdict == Verdict::Fail;
      skips += c.verdict == Verdict::Skip;
    }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"kiln validate\" tests=\"" << tests << "\" failures=\"" << failures
      << "\" errors=\"0\" skipped=\"" << skips << "\">\n";
  for (const auto& r : reports) {
    std::size_t f = 0, s = 0;
    for (const auto& c : r.checks) {
      f += c.verdict == Verdict::Fail;
      s += c.verdict == Verdict::Skip;
    }
    std::string name = markup_escape(r.wheel.filename().string());
    out << "  <testsuite name=\"" << name << "\" tests=\"" << r.checks.size() << "\" failures=\""
        << f << "\" errors=\"0\" skipped=\"" << s << "\">\n";
    for (const auto& c : r.checks) {
      out << "    <testcase classname=\"" << name << "\" name=\"" << markup_escape(c.id) << "\"";
      std::string details = markup_escape(join(c.details, "\n"));
      if (c.verdict == Verdict::Fail) {
        out << ">\n      <failure message=\"" << markup_escape(c.message) << "\">" << details
            << "</failure>\n    </testcase>\n";
      } else if (c.verdict == Verdict::Skip) {
        out << ">\n      <skipped message=\"" << markup_escape(c.message)
            << "\"/>\n    </testcase>\n";
      } else {
        out << ">\n      <system-out>" << verdict_name(c.verdict) << ": "
            << markup_escape(c.message) << (details.empty() ? "" : "\n" + details)
            << "</system-out>\n    </testcase>\n";
      }
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace kiln::validate
