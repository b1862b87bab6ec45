#include "tests/option_table.h"

#include <unistd.h>

#include <cctype>
#include <sstream>

namespace kv::testing_support {

std::set<std::string> HelpOptionNames(const std::string& help) {
  std::set<std::string> names;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == 0 || start == std::string::npos || line[start] != '-') continue;
    const std::size_t dashes = line.find("--", start);
    if (dashes == std::string::npos) continue;
    const std::size_t end = line.find_first_of(" ={[", dashes);
    names.insert(line.substr(dashes, end == std::string::npos ? end : end - dashes));
  }
  return names;
}

std::set<std::string> HelpRangeNames(const std::string& help) {
  std::set<std::string> names;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == 0 || start == std::string::npos) continue;
    bool ranged = false;
    for (std::size_t dots = line.find(".."); dots != std::string::npos && !ranged;
         dots = line.find("..", dots + 1)) {
      ranged = dots > 0 && dots + 2 < line.size() && std::isdigit(line[dots - 1]) != 0 &&
               std::isdigit(line[dots + 2]) != 0;
    }
    if (!ranged) continue;
    // "  -q,--quiet ...", "  --batch UINT:...", "  n UINT:...": the long name, else the first word.
    const std::size_t dashes = line.find("--", start);
    const std::size_t first =
        dashes != std::string::npos && dashes < line.find(' ', start) ? dashes : start;
    const std::size_t end = line.find_first_of(" ={[", first);
    names.insert(line.substr(first, end == std::string::npos ? end : end - first));
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
