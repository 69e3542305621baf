// The self-contained visualizer page: visualizer/index.html with its stylesheet and scripts inlined and the trace
// (and optionally a benchmark) as JSON data blocks, so one file opens with a double-click and needs no network.
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "sim/core/error.hpp"
#include "sim/os/output_file.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot read " + p.string() + ", a file of the visualizer; is the visualizer folder complete?");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value of attribute `name` in one tag ("" when absent).
std::string attribute(const std::string& tag, const std::string& name) {
  const std::string key = name + "=\"";
  const auto at = tag.find(key);
  if (at == std::string::npos) return "";
  const auto end = tag.find('"', at + key.size());
  return end == std::string::npos ? "" : tag.substr(at + key.size(), end - at - key.size());
}

// Inline <script> and <style> text ends at "</script" or "</style". JSON may carry "</" in a string: it is
// written "<\/" (the same string to a JSON reader). The visualizer's own files must not contain the end tag.
std::string json_block(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    out += json[i];
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') out += '\\';
  }
  return out;
}

std::string inline_block(const std::filesystem::path& file, const std::string& end_tag) {
  std::string text = read_file(file), lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find(end_tag) != std::string::npos)
    throw Error(file.string() + " contains \"" + end_tag + "\", which would end its inline block early");
  return text;
}

std::string data_block(const char* id, const std::string& json) {
  return "<script id=\"" + std::string(id) + "\" type=\"application/json\">" + json_block(json) + "</script>";
}

}  // namespace

std::filesystem::path visualizer_dir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("CPSIM_VISUALIZER_DIR"); env && *env)
    dir = env;
  else
    dir = CPSIM_VISUALIZER_DIR;  // the source tree's (sim/CMakeLists.txt): absolute, whatever the working folder
  if (!std::filesystem::exists(dir / "index.html"))
    throw Error("cannot find the visualizer page " + (dir / "index.html").string() +
                "; set CPSIM_VISUALIZER_DIR to the visualizer folder of a cpsim checkout");
  return dir;
}

std::string html_page(const RunResult& r, const std::string& bench_json, const std::string& compare_json) {
  return html_page(trace_json(r), bench_json, compare_json);
}

std::string html_page(const std::string& trace, const std::string& bench_json, const std::string& compare_json) {
  const std::filesystem::path dir = visualizer_dir();
  const std::string page = read_file(dir / "index.html");
  std::string out;
  std::size_t pos = 0;
  // Walk the page's tags: <link rel="stylesheet" href> and <script src> are replaced by their files' text,
  // the data marker by the data blocks.
  const std::string marker = "<!-- cpsim-data -->";
  while (pos < page.size()) {
    const auto lt = page.find('<', pos);
    if (lt == std::string::npos) {
      out.append(page, pos, std::string::npos);
      break;
    }
    out.append(page, pos, lt - pos);
    if (page.compare(lt, marker.size(), marker) == 0) {
      out += data_block("cpsim-trace", trace);
      if (!bench_json.empty()) out += "\n" + data_block("cpsim-bench", bench_json);
      if (!compare_json.empty()) out += "\n" + data_block("cpsim-compare", compare_json);
      pos = lt + marker.size();
      continue;
    }
    const auto gt = page.find('>', lt);
    if (gt == std::string::npos) throw Error("visualizer/index.html has an unclosed tag");
    const std::string tag = page.substr(lt, gt - lt + 1);
    if (tag.rfind("<link", 0) == 0 && attribute(tag, "rel") == "stylesheet") {
      out += "<style>\n" + inline_block(dir / attribute(tag, "href"), "</style") + "</style>";
      pos = gt + 1;
    } else if (tag.rfind("<script", 0) == 0 && !attribute(tag, "src").empty()) {
      out += "<script>\n" + inline_block(dir / attribute(tag, "src"), "</script") + "</script>";
      const auto close = page.find("</script>", gt);
      if (close == std::string::npos) throw Error("visualizer/index.html has an unclosed <script>");
      pos = close + 9;
    } else {
      out += tag;
      pos = gt + 1;
    }
  }
  if (page.find(marker) == std::string::npos) throw Error("visualizer/index.html lacks the " + marker + " marker");
  return out;
}

void write_html(const std::filesystem::path& path, const RunResult& r, const std::string& bench_json,
                const std::string& compare_json) {
  write_file(path.string(), html_page(r, bench_json, compare_json));
}

}  // namespace cpsim
