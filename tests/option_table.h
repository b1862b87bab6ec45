// Table-driven option tests: every option a binary lists
// in --help has a row with a value it accepts and one it refuses.
//
// HelpOptionNames() reads the option names from the binary's --help, so a
// table test can fail when an option is added without a row. The rows
// themselves live beside the binary's other CLI tests.
#ifndef KV_TESTS_OPTION_TABLE_H_
#define KV_TESTS_OPTION_TABLE_H_

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace kv::testing_support {

struct OptionRow {
  std::string name;               // the long name as --help shows it, e.g. "--batch"
  std::vector<std::string> good;  // arguments carrying a value it accepts
  std::vector<std::string> bad;   // arguments carrying a value it refuses
  std::string names;              // must appear in the refusal's one line
};

// A numeric argument of a binary and the range its refusals state, for the
// table test of the one number rule (tests/number_cli_test.cpp).
struct NumberRow {
  std::string name;                       // "--delay-us", or the positional "n" / "port"
  bool whole;                             // a whole number (else a real one)
  std::string lo, hi;                     // the range as a refusal prints it: "allowed lo..hi"
  std::string good;                       // a value it accepts
  std::vector<std::string> context;       // arguments it needs beside it
  std::vector<std::string> out_of_range;  // values just outside the range
};

// The long option names ("--batch", "--help", ...) in `help`, the text a
// CLI11 --help prints: every line that starts with spaces then "-x," or "--"
// (a negated flag's "{false}" and any "=default" are cut off).
std::set<std::string> HelpOptionNames(const std::string& help);

// The names (long option, or positional) of the arguments whose line in
// `help` shows a range "lo..hi" (a digit on both sides of the dots).
std::set<std::string> HelpRangeNames(const std::string& help);

// The names of `rows`.
std::set<std::string> RowNames(const std::vector<OptionRow>& rows);

// An empty folder under the temp directory for the files good rows write,
// named after `tag` and the process; removed with everything in it when the
// ScratchDir goes away.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace kv::testing_support

#endif  // KV_TESTS_OPTION_TABLE_H_
