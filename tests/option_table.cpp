#include "tests/option_table.h"

#include <unistd.h>

#include <cctype>
#include <sstream>

namespace kv::testing_support {

namespace {

// An indented line of a CLI11 --help and the name it starts with: the long
// option ("-q,--quiet" gives "--quiet"), or for a positional (and for a
// description continued on its own line) the first word; an "=default" or a
// negated flag's "{false}" is cut off.
struct HelpLine {
  std::string name;
  std::string text;
  bool option;  // the line starts with '-'
};

std::vector<HelpLine> HelpLines(const std::string& help) {
  std::vector<HelpLine> lines;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == 0 || start == std::string::npos) continue;
    const bool option = line[start] == '-';
    const std::size_t first = option ? line.find("--", start) : start;
    if (first == std::string::npos) continue;
    const std::size_t end = line.find_first_of(" ={[", first);
    lines.push_back(
        {line.substr(first, end == std::string::npos ? end : end - first), line, option});
  }
  return lines;
}

// True if `text` shows a range "lo..hi": a digit on both sides of "..".
bool ShowsRange(const std::string& text) {
  for (std::size_t dots = text.find(".."); dots != std::string::npos;
       dots = text.find("..", dots + 1)) {
    if (dots > 0 && dots + 2 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[dots - 1])) != 0 &&
        std::isdigit(static_cast<unsigned char>(text[dots + 2])) != 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::set<std::string> HelpOptionNames(const std::string& help) {
  std::set<std::string> names;
  for (const HelpLine& line : HelpLines(help)) {
    if (line.option) names.insert(line.name);
  }
  return names;
}

std::set<std::string> HelpRangeNames(const std::string& help) {
  std::set<std::string> names;
  for (const HelpLine& line : HelpLines(help)) {
    if (ShowsRange(line.text)) names.insert(line.name);
  }
  return names;
}

std::set<std::string> RowNames(const std::vector<OptionRow>& rows) {
  std::set<std::string> names;
  for (const OptionRow& row : rows) names.insert(row.name);
  return names;
}

ScratchDir::ScratchDir(const std::string& tag)
    : path_(std::filesystem::temp_directory_path() /
            ("lockbench_" + tag + "_" + std::to_string(::getpid()))) {
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;  // a test's leftovers in /tmp are not worth a failure
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace kv::testing_support
